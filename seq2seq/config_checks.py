"""The rules of the schemas in ``config.py`` that a type cannot say.

The schemas check types and choices while Hydra composes a config; these check each
schema's values: ranges (``decode.beam_size=0``), fields of one schema that cannot
work together (``decode.n_best`` above the beam, ``luong_dot`` between states of
different sizes), values left unset (``checkpoint=???``), files a field names, and keys
that ``+key=value`` added but no schema knows (``+trainer.max_epoch=3``, a typo that
would otherwise be ignored). Each problem raises ``ConfigValueError`` naming the key,
its value and what it must be, before any corpus is loaded or any model built.

A rule that ties the settings of one command together lives with that command
(``cli/train.py``'s ``check_train``, ``cli/checks.py`` for the decoding commands);
library code that Python callers reach without a command runs the schema's check
(``build_model`` runs ``check_model``, ``decode_settings`` runs ``check_decode``), so
each rule is written once.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq.config import AttentionType, Corpus, Normalizer
from seq2seq.errors import ConfigValueError

# (predicate, what the value must be); None values (unset optionals) always pass.
Rule = tuple[Callable[[Any], bool], str]
AT_LEAST_1: Rule = (lambda v: v >= 1, "must be at least 1")
NON_NEGATIVE: Rule = (lambda v: v >= 0, "must be >= 0")
POSITIVE: Rule = (lambda v: v > 0, "must be > 0")
RATE: Rule = (lambda v: 0 <= v < 1, "must be in [0, 1)")
FRACTION: Rule = (lambda v: 0 <= v <= 1, "must be in [0, 1]")

PHRASEBOOK_PAIRS = (("en", "fr"), ("fr", "en"))
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")
# What to give for a key left at ??? (MISSING), by its last part.
_MISSING_HINTS = {
    "checkpoint": "a best.pt or last.pt written by seq2seq-train",
    "local_dir": "a folder of <split>.jsonl|tsv|csv or <split>.<lang> files",
    "src_lang": "the source language's column or file suffix, e.g. de",
    "tgt_lang": "the target language's column or file suffix, e.g. en",
}


def _get(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def check_values(cfg: Any, prefix: str, rules: dict[str, Rule]) -> None:
    """Raise ``ConfigValueError`` for the first key of ``rules`` whose value (if set)
    breaks its rule; ``prefix`` is where ``cfg`` sits in the command's config."""
    for key, (ok, want) in rules.items():
        value = _get(cfg, key)
        if value is not None and not ok(value):
            raise ConfigValueError(f"{prefix}{key}={show(value)}: {want}")


def require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigValueError(message)


def require_file(setting: str, path: str, hint: str) -> None:
    """``setting=path`` must name an existing file; ``hint`` says what to give."""
    require(
        Path(path).expanduser().is_file(), f"{setting}={path}: no such file ({hint})"
    )


def check_known_keys(cfg: DictConfig, prefix: str = "") -> None:
    """Every key of a typed node is a field of its schema: ``+key=value`` can add
    keys Hydra accepts but nothing reads, so a typo there would be silently ignored."""
    schema = OmegaConf.get_type(cfg)
    if dataclasses.is_dataclass(schema):
        fields = [f.name for f in dataclasses.fields(schema)]
        for key in cfg:
            if key not in fields:
                raise ConfigValueError(
                    f"{prefix}{key}: no such setting in {schema.__name__}; "
                    + did_you_mean(str(key), fields, prefix)
                )
    for key in cfg:
        value = None if OmegaConf.is_missing(cfg, key) else cfg[key]
        if isinstance(value, DictConfig):
            check_known_keys(value, f"{prefix}{key}.")


def did_you_mean(key: str, fields: list[str], prefix: str = "") -> str:
    """``did you mean PREFIX.CLOSEST?``, or the list of ``fields`` if none is close."""
    close = difflib.get_close_matches(key, fields, n=1)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    return f"the settings there: {', '.join(fields)}"


def check_missing(cfg: DictConfig) -> None:
    """No key is left at ``???``: name the first one and what to give."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        key = missing[0]
        hint = _MISSING_HINTS.get(key.rsplit(".", 1)[-1], "a value")
        raise ConfigValueError(f"{key} is not set: give {key}=... ({hint})")


# ----------------------------------------------------------------- per schema
def check_folder(value: str | None, key: str) -> None:
    if value is not None:
        hint = _MISSING_HINTS["local_dir"]
        require(
            Path(value).expanduser().is_dir(), f"{key}={value}: no such folder ({hint})"
        )


SIZES = ("phrasebook.train_size", "phrasebook.validation_size", "phrasebook.test_size")


def check_data(cfg: Any, prefix: str = "data.") -> None:
    sizes = ("max_len", "batch_tokens", *SIZES)
    check_values(cfg, prefix, dict.fromkeys(sizes, AT_LEAST_1))
    name = Corpus(cfg.name) if cfg.name is not None else None
    pair = (cfg.src_lang, cfg.tgt_lang)
    if name == Corpus.phrasebook:
        require(
            pair in PHRASEBOOK_PAIRS,
            f"{prefix}src_lang={pair[0]} {prefix}tgt_lang={pair[1]}: the phrasebook "
            "is English–French; use en→fr or fr→en, or another corpus "
            "(data=multi30k, data=local)",
        )
    elif name == Corpus.local:
        require(
            cfg.local_dir is not None,
            f"{prefix}name=local needs {prefix}local_dir=DIR "
            f"({_MISSING_HINTS['local_dir']})",
        )
    if name != Corpus.phrasebook:
        check_folder(cfg.local_dir, f"{prefix}local_dir")
    links = cfg.get("alignments") or {}
    for split in ("train", "validation", "test"):
        if links.get(split) is not None:
            hint = "a file of Pharaoh links, one line per pair of the split"
            require_file(f"{prefix}alignments.{split}", links[split], hint)


def check_tokenizer(cfg: Any, prefix: str = "tokenizer.") -> None:
    vocab = (lambda v: v > 4, "must exceed the 4 special pieces")
    coverage = (lambda v: 0 < v <= 1, "must be in (0, 1]")
    check_values(cfg, prefix, {"vocab_size": vocab, "character_coverage": coverage})
    check_values(cfg, prefix, {"sampling_alpha": NON_NEGATIVE})


def check_model(cfg: Any, prefix: str = "model.") -> None:
    sizes = ["emb_dim", "encoder.hidden_size", "encoder.layers"]
    sizes += ["decoder.hidden_size", "decoder.layers", "attention.heads"]
    sizes += ["attention.dim", "encoder.transition_depth", "decoder.transition_depth"]
    rates = ["emb_dropout", "word_dropout", "encoder.dropout", "decoder.dropout"]
    check_values(cfg, prefix, dict.fromkeys(sizes, AT_LEAST_1))
    check_values(cfg, prefix, dict.fromkeys(rates, RATE))
    deepest = max(cfg.encoder.layers, cfg.decoder.layers)
    require(
        not cfg.residual or deepest >= 3,
        f"{prefix}residual=true adds residual connections from the third GRU layer "
        f"up, but {prefix}encoder.layers={cfg.encoder.layers} and "
        f"{prefix}decoder.layers={cfg.decoder.layers}; set one of them to 3 or more",
    )
    kind = AttentionType(cfg.attention.type)
    dec = cfg.decoder
    if dec.context_to_layers:
        style = dec.style or cfg.attention.style
        require(
            str(style) == "luong"
            and not dec.input_feeding
            and dec.layers >= 2
            and kind != AttentionType.none,
            f"{prefix}decoder.context_to_layers=true (RNMT+) needs the Luong style "
            f"without input feeding, 2 or more decoder layers and an attention; here "
            f"style {style}, {prefix}decoder.input_feeding="
            f"{str(dec.input_feeding).lower()}, {prefix}decoder.layers={dec.layers}, "
            f"{prefix}attention.type={kind}",
        )
    check_self_attention(cfg.encoder, f"{prefix}encoder.")
    normalizer = Normalizer(cfg.attention.normalizer)
    require(
        kind != AttentionType.none or normalizer == Normalizer.softmax,
        f"{prefix}attention.normalizer={normalizer} has nothing to normalize with "
        f"{prefix}attention.type=none; drop the normalizer or choose an attention",
    )
    decoder, memory = cfg.decoder.hidden_size, 2 * cfg.encoder.hidden_size
    if kind == AttentionType.luong_dot:
        require(
            decoder == memory,
            f"luong_dot attention compares decoder and encoder states, so "
            f"{prefix}decoder.hidden_size ({decoder}) must equal 2 * "
            f"{prefix}encoder.hidden_size ({memory}); change one, or use luong_general",
        )
    if kind == AttentionType.multihead:
        dim, heads = cfg.attention.dim or decoder, cfg.attention.heads
        require(
            dim % heads == 0,
            f"{prefix}attention.heads={heads} must divide the attention size {dim} "
            f"({prefix}attention.dim, by default {prefix}decoder.hidden_size)",
        )


def check_self_attention(cfg: Any, prefix: str = "model.encoder.") -> None:
    """The Transformer blocks over the encoder's states."""
    sa = cfg.self_attention
    key = f"{prefix}self_attention."
    check_values(sa, key, {"layers": NON_NEGATIVE, "heads": AT_LEAST_1})
    check_values(sa, key, {"ffn": POSITIVE, "dropout": RATE})
    check_values(sa, key, {"attention_dropout": RATE})
    size = 2 * cfg.hidden_size
    require(
        size % sa.heads == 0,
        f"{key}heads={sa.heads} does not divide the encoder's output size {size} "
        f"(2 * {prefix}hidden_size); choose a divisor of {size}",
    )


def check_optim(cfg: Any, prefix: str = "optim.") -> None:
    check_values(cfg, prefix, {"lr": POSITIVE, "weight_decay": NON_NEGATIVE})
    blocks = {
        "self_attention_lr_scale": POSITIVE,
        "self_attention_warmup_steps": NON_NEGATIVE,
    }
    check_values(cfg, prefix, blocks)
    betas = list(cfg.betas)
    require(
        len(betas) == 2 and all(0 <= b < 1 for b in betas),
        f"{prefix}betas={betas}: must be two values in [0, 1), e.g. [0.9,0.999]",
    )


def check_scheduler(cfg: Any, prefix: str = "scheduler.") -> None:
    factor = (lambda v: 0 < v < 1, "must be in (0, 1)")
    counts = dict.fromkeys(("patience", "min_lr", "warmup_steps"), NON_NEGATIVE)
    check_values(cfg, prefix, {"factor": factor, **counts})


BEAM: Rule = (lambda v: v >= 1, "must be at least 1 (1 is greedy search)")


def check_decode(cfg: Any, prefix: str = "decode.") -> None:
    lengths = ("length_penalty", "coverage_penalty", "max_len_a", "max_len_b")
    rules = {"beam_size": BEAM, "n_best": AT_LEAST_1, "batch_tokens": AT_LEAST_1}
    rules["max_len_coverage"] = (lambda v: 0 < v <= 1, "must be in (0, 1]")
    check_values(cfg, prefix, rules | dict.fromkeys(lengths, NON_NEGATIVE))
    require(
        cfg.n_best <= cfg.beam_size,
        f"{prefix}n_best={cfg.n_best} must not exceed {prefix}beam_size="
        f"{cfg.beam_size}: a beam keeps only that many hypotheses",
    )
    require(
        cfg.max_len_a is None or cfg.max_len_a > 0 or cfg.max_len_b >= 1,
        f"{prefix}max_len_a=0 and {prefix}max_len_b=0 allow no output word",
    )


def check_device(value: str, key: str) -> None:
    require(
        bool(_DEVICE.match(str(value))),
        f"{key}={value!r}: not a device; use auto, cpu, cuda or cuda:N",
    )


def check_trainer(cfg: Any, prefix: str = "trainer.") -> None:
    check_device(cfg.device, f"{prefix}device")
    ones = ["threads", "max_epochs", "max_steps", "accumulate", "log_every"]
    ones += ["valid_every", "valid_max_sentences", "valid_beam_size", "patience"]
    check_values(cfg, prefix, dict.fromkeys(ones, AT_LEAST_1))
    positive = ("max_minutes", "clip_grad_norm", "teacher_forcing.k")
    counts = ("guided_alignment", "rdrop", "alignment_samples", "keep_last")
    counts += ("compile_bucket", "loss_chunk_mb")
    check_values(cfg, prefix, dict.fromkeys(positive, POSITIVE))
    check_values(cfg, prefix, dict.fromkeys(counts, NON_NEGATIVE))
    rates = {"label_smoothing": RATE, "ema_decay": RATE}
    rates["teacher_forcing.min_ratio"] = FRACTION
    check_values(cfg, prefix, rates)
    check_compile_mode(cfg, prefix)
    if cfg.resume_from is not None:
        require_file(
            f"{prefix}resume_from",
            cfg.resume_from,
            "give a checkpoints/last.pt of an earlier run",
        )


COMPILE_SWITCHES = ("auto", "true", "false")


def compile_switch(value: Any) -> str:
    """``trainer.compile`` as one of ``COMPILE_SWITCHES`` (Hydra hands ``true`` over
    as the string ``"True"``); anything else is left as given for the check."""
    text = str(value).strip().lower()
    return text if text in COMPILE_SWITCHES else str(value)


def check_compile_mode(cfg: Any, prefix: str = "trainer.") -> None:
    """``compile`` is auto, true or false; a ``compile_mode`` other than default asks
    for everything compiled."""
    switch = compile_switch(getattr(cfg, "compile", "auto"))
    require(
        switch in COMPILE_SWITCHES,
        f"{prefix}compile={switch!r}: use auto, true or false",
    )
    mode = str(getattr(cfg, "compile_mode", "default"))
    require(
        mode == "default" or switch == "true",
        f"{prefix}compile_mode={mode} needs {prefix}compile=true "
        f"(or leave {prefix}compile_mode=default)",
    )


def check_composed(cfg: DictConfig) -> None:
    """What every command's composed config must pass before its own rules: no key
    left at ``???``, no key that no schema knows."""
    check_missing(cfg)
    check_known_keys(cfg)
