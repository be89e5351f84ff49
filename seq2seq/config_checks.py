"""Value checks of the composed configs, run first thing in every command.

The schemas (``config.py``) check types and choices while Hydra composes a config;
these check what a type cannot say: ranges (``decode.beam_size=0``), settings that
cannot work together (``decode.n_best`` above the beam, ``luong_dot`` between states of
different sizes), values left unset (``checkpoint=???``), files that must exist, and
keys that ``+key=value`` added but no schema knows (``+trainer.max_epoch=3``, a typo
that would otherwise be ignored). Each problem raises ``ConfigValueError`` naming the
key, its value and what it must be, before any corpus is loaded or any model built.

Library code that Python callers reach without a command calls the same checks
(``build_model`` runs ``check_model``, ``decode_settings`` runs ``check_decode``), so a
rule lives here once.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq.config import AlignFormat, AttentionType, Corpus, Normalizer, PieceModel
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


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def check_values(cfg: Any, prefix: str, rules: dict[str, Rule]) -> None:
    """Raise ``ConfigValueError`` for the first key of ``rules`` whose value (if set)
    breaks its rule; ``prefix`` is where ``cfg`` sits in the command's config."""
    for key, (ok, want) in rules.items():
        value = _get(cfg, key)
        if value is not None and not ok(value):
            raise ConfigValueError(f"{prefix}{key}={_show(value)}: {want}")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigValueError(message)


def _require_file(setting: str, path: str, hint: str) -> None:
    """``setting=path`` must name an existing file; ``hint`` says what to give."""
    _require(
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
def _folder(value: str | None, key: str) -> None:
    if value is not None:
        hint = _MISSING_HINTS["local_dir"]
        _require(
            Path(value).expanduser().is_dir(), f"{key}={value}: no such folder ({hint})"
        )


SIZES = ("phrasebook.train_size", "phrasebook.validation_size", "phrasebook.test_size")


def check_data(cfg: Any, prefix: str = "data.") -> None:
    sizes = ("max_len", "batch_tokens", *SIZES)
    check_values(cfg, prefix, dict.fromkeys(sizes, AT_LEAST_1))
    name = Corpus(cfg.name) if cfg.name is not None else None
    pair = (cfg.src_lang, cfg.tgt_lang)
    if name == Corpus.phrasebook:
        _require(
            pair in PHRASEBOOK_PAIRS,
            f"{prefix}src_lang={pair[0]} {prefix}tgt_lang={pair[1]}: the phrasebook "
            "is English–French; use en→fr or fr→en, or another corpus "
            "(data=multi30k, data=local)",
        )
    elif name == Corpus.local:
        _require(
            cfg.local_dir is not None,
            f"{prefix}name=local needs {prefix}local_dir=DIR "
            f"({_MISSING_HINTS['local_dir']})",
        )
    if name != Corpus.phrasebook:
        _folder(cfg.local_dir, f"{prefix}local_dir")


def check_tokenizer(cfg: Any, prefix: str = "tokenizer.") -> None:
    vocab = (lambda v: v > 4, "must exceed the 4 special pieces")
    coverage = (lambda v: 0 < v <= 1, "must be in (0, 1]")
    check_values(cfg, prefix, {"vocab_size": vocab, "character_coverage": coverage})
    check_values(cfg, prefix, {"sampling_alpha": NON_NEGATIVE})


def check_sampling(alpha: float, model_type: Any, prefix: str = "tokenizer.") -> None:
    """Subword sampling (``data/sampling.py``) draws unigram segmentations only:
    SentencePiece's BPE-dropout cannot be seeded to repeat in another process, so a
    resumed run would not be exact."""
    _require(alpha >= 0, f"{prefix}sampling_alpha={alpha}: must be >= 0 (0: off)")
    _require(
        alpha == 0 or PieceModel(model_type) == PieceModel.unigram,
        f"{prefix}sampling_alpha={alpha} samples unigram segmentations; "
        f"{prefix}model_type={model_type} (BPE-dropout) cannot be sampled "
        "reproducibly, so a resumed run would not be exact: set "
        f"{prefix}model_type=unigram or {prefix}sampling_alpha=0",
    )


def check_model(cfg: Any, prefix: str = "model.") -> None:
    sizes = ["emb_dim", "encoder.hidden_size", "encoder.layers"]
    sizes += ["decoder.hidden_size", "decoder.layers", "attention.heads"]
    sizes += ["attention.dim"]
    rates = ["emb_dropout", "word_dropout", "encoder.dropout", "decoder.dropout"]
    check_values(cfg, prefix, dict.fromkeys(sizes, AT_LEAST_1))
    check_values(cfg, prefix, dict.fromkeys(rates, RATE))
    kind = AttentionType(cfg.attention.type)
    normalizer = Normalizer(cfg.attention.normalizer)
    _require(
        kind != AttentionType.none or normalizer == Normalizer.softmax,
        f"{prefix}attention.normalizer={normalizer} has nothing to normalize with "
        f"{prefix}attention.type=none; drop the normalizer or choose an attention",
    )
    decoder, memory = cfg.decoder.hidden_size, 2 * cfg.encoder.hidden_size
    if kind == AttentionType.luong_dot:
        _require(
            decoder == memory,
            f"luong_dot attention compares decoder and encoder states, so "
            f"{prefix}decoder.hidden_size ({decoder}) must equal 2 * "
            f"{prefix}encoder.hidden_size ({memory}); change one, or use luong_general",
        )
    if kind == AttentionType.multihead:
        dim, heads = cfg.attention.dim or decoder, cfg.attention.heads
        _require(
            dim % heads == 0,
            f"{prefix}attention.heads={heads} must divide the attention size {dim} "
            f"({prefix}attention.dim, by default {prefix}decoder.hidden_size)",
        )


def check_optim(cfg: Any, prefix: str = "optim.") -> None:
    check_values(cfg, prefix, {"lr": POSITIVE, "weight_decay": NON_NEGATIVE})
    betas = list(cfg.betas)
    _require(
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
    _require(
        cfg.n_best <= cfg.beam_size,
        f"{prefix}n_best={cfg.n_best} must not exceed {prefix}beam_size="
        f"{cfg.beam_size}: a beam keeps only that many hypotheses",
    )
    _require(
        cfg.max_len_a is None or cfg.max_len_a > 0 or cfg.max_len_b >= 1,
        f"{prefix}max_len_a=0 and {prefix}max_len_b=0 allow no output word",
    )


def check_device(value: str, key: str) -> None:
    _require(
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
    check_values(cfg, prefix, dict.fromkeys(positive, POSITIVE))
    check_values(cfg, prefix, dict.fromkeys(counts, NON_NEGATIVE))
    rates = {"label_smoothing": RATE, "ema_decay": RATE}
    rates["teacher_forcing.min_ratio"] = FRACTION
    check_values(cfg, prefix, rates)
    if cfg.resume_from is not None:
        _require_file(
            f"{prefix}resume_from",
            cfg.resume_from,
            "give a checkpoints/last.pt of an earlier run",
        )


def _check_decoding_overrides(cfg: DictConfig) -> None:
    """The checkpoint and decoding keys of evaluate, translate and align (None: the
    checkpoint's); a missing checkpoint is named before torch is even imported."""
    paths = checkpoint_paths(cfg.checkpoint)
    _require(bool(paths), "checkpoint=[]: give at least one checkpoint")
    for path in paths:
        _require_file(
            "checkpoint", path, "give a best.pt or last.pt written by seq2seq-train"
        )
    check_device(cfg.device, "device")
    rules = {"beam_size": BEAM, "batch_tokens": AT_LEAST_1}
    for key in ("length_penalty", "coverage_penalty"):
        if key in cfg:
            rules[key] = NON_NEGATIVE
    check_values(cfg, "", rules)


def _check_reverse_file(cfg: DictConfig) -> None:
    """``reverse_checkpoint``, when set: a path or a list (an ensemble) of files;
    and the ``two_way`` readout's settings."""
    rules = {
        "lexicon": FRACTION,
        "lexicon_iterations": AT_LEAST_1,
        "floor": FRACTION,
        "add": (lambda v: 0 < v <= 1, "must be in (0, 1], or null for none"),
    }
    check_values(cfg.two_way, "two_way.", rules)
    if cfg.reverse_checkpoint is None:
        return
    paths = checkpoint_paths(cfg.reverse_checkpoint)
    _require(bool(paths), "reverse_checkpoint=[]: give at least one checkpoint")
    for path in paths:
        _require_file(
            "reverse_checkpoint",
            path,
            "give a best.pt of a model trained the other way on the same corpus",
        )


def corpus_summary(data: Any) -> str:
    """A training corpus in a few words: ``phrasebook en→fr (train 20000, validation
    500, test 500, seed 1234)``, ``multi30k de→en (hub bentrevett/multi30k)``."""
    name = Corpus(data.name)
    where = ""
    if name == Corpus.phrasebook:
        pb = data.phrasebook
        where = (
            f"train {pb.train_size}, validation {pb.validation_size}, "
            f"test {pb.test_size}, seed {pb.seed}"
        )
    elif data.hub_id is not None or data.local_dir is not None:
        where = f"hub {data.hub_id}" if data.hub_id is not None else data.local_dir
    text = f"{name} {data.src_lang}→{data.tgt_lang}"
    return f"{text} ({where})" if where else text


def _corpus_key(data: Any) -> tuple:
    """What makes two training corpora the same pairs, whichever way they are read."""
    name = Corpus(data.name)
    phrasebook = None
    if name == Corpus.phrasebook:
        phrasebook = (*(_get(data, key) for key in SIZES), data.phrasebook.seed)
    return name, data.hub_id, data.local_dir, phrasebook


def check_reverse(
    forward: Any, reverse: Any, forward_name: Any, reverse_name: Any
) -> None:
    """The checkpoint a symmetrized alignment reads the other way (``reverse``, its
    training ``data``) was trained on ``forward``'s corpus with the languages
    swapped: otherwise its links would not be over the same words, or it may have
    trained on the pairs being aligned."""
    pair = (reverse.tgt_lang, reverse.src_lang)
    swapped = pair == (forward.src_lang, forward.tgt_lang)
    _require(
        swapped and _corpus_key(reverse) == _corpus_key(forward),
        f"reverse_checkpoint={reverse_name} ({corpus_summary(reverse)}) is not "
        f"checkpoint={forward_name} ({corpus_summary(forward)}) read the other way: "
        "give a model trained on the same corpus with data.src_lang and "
        "data.tgt_lang swapped",
    )


def checkpoint_paths(value: Any) -> list[str]:
    """``checkpoint=PATH`` or ``checkpoint=[A,B]`` (an ensemble) as a list of paths."""
    if isinstance(value, str | Path):
        return [str(value)]
    return [str(p) for p in value]


# ----------------------------------------------------------------- per command
def check_prepare(cfg: DictConfig) -> None:
    check_data(cfg.data)
    check_tokenizer(cfg.tokenizer)


def check_train(cfg: DictConfig) -> None:
    check_data(cfg.data)
    check_tokenizer(cfg.tokenizer)
    check_model(cfg.model)
    check_optim(cfg.optim)
    check_scheduler(cfg.scheduler)
    check_decode(cfg.decode)
    check_trainer(cfg.trainer)
    check_sampling(cfg.tokenizer.sampling_alpha, cfg.tokenizer.model_type)
    _require(
        not (
            cfg.trainer.guided_alignment > 0
            and AttentionType(cfg.model.attention.type) == AttentionType.none
        ),
        "trainer.guided_alignment > 0 needs an attention to guide; "
        "model/attention=none has none",
    )


def check_evaluate(cfg: DictConfig) -> None:
    """The overrides alone; evaluate checks the corpus settings they make with the
    checkpoint's (``check_data``) once the checkpoint is read."""
    _check_decoding_overrides(cfg)
    check_values(cfg.data, "data.", dict.fromkeys(SIZES, AT_LEAST_1))
    _folder(cfg.data.local_dir, "data.local_dir")
    _check_reverse_file(cfg)
    _require(
        cfg.reverse_checkpoint is None or cfg.alignment,
        "reverse_checkpoint= combines the two directions' word alignments for AER: "
        "add alignment=true",
    )


def check_translate(cfg: DictConfig) -> None:
    _check_decoding_overrides(cfg)
    check_values(cfg, "", {"max_input_pieces": AT_LEAST_1})
    if cfg.input is not None:
        _require_file("input", cfg.input, "leave input unset to read standard input")


def check_align(cfg: DictConfig) -> None:
    _check_decoding_overrides(cfg)
    check_values(cfg, "", {"threshold": FRACTION})
    for key in ("text", "reference"):
        value = cfg[key]
        _require(
            value is None or bool(value.strip()),
            f'{key}={_show(value)} is empty: give the sentence, {key}="..."',
        )
    _require(
        cfg.text is not None or cfg.split is not None,
        'give text="..." or split=NAME (optionally index=[...])',
    )
    _require(
        cfg.text is None or cfg.split is None,
        'give text="..." or split=NAME, not both',
    )
    _require(
        cfg.reference is None or cfg.text is not None,
        "reference= goes with text=; for a split use references=true",
    )
    _require(
        cfg.index is None or cfg.split is not None,
        "index= picks pairs of a split: give split=NAME too",
    )
    _require(
        not (cfg.attribution and len(checkpoint_paths(cfg.checkpoint)) > 1),
        "attribution=true explains one model: give one checkpoint, not an ensemble",
    )
    negative = [i for i in cfg.index or [] if i < 0]
    _require(not negative, f"index={list(cfg.index or [])}: indices count from 0")
    _check_reverse_file(cfg)
    _require(
        cfg.reverse_checkpoint is None
        or (AlignFormat(cfg.format) == AlignFormat.pharaoh and cfg.words),
        f"reverse_checkpoint= writes symmetrized word links (format={cfg.format}, "
        f"words={str(cfg.words).lower()}): give format=pharaoh words=true",
    )
    _require(
        cfg.reverse_checkpoint is None or cfg.threshold is None,
        f"threshold={cfg.threshold} reads many links per word from one direction; "
        "reverse_checkpoint= combines each direction's one link per word: drop one",
    )
    _require(
        cfg.reverse_checkpoint is None or not cfg.attribution,
        "attribution=true explains one model's attention; reverse_checkpoint= "
        "writes links of two: drop one",
    )


CHECKS: dict[str, Callable[[DictConfig], None]] = {
    "prepare": check_prepare,
    "train": check_train,
    "evaluate": check_evaluate,
    "translate": check_translate,
    "align": check_align,
}


def check_config(command: str, cfg: DictConfig) -> None:
    """All checks of one command's composed config (``command`` as in ``CHECKS``)."""
    check_missing(cfg)
    check_known_keys(cfg)
    CHECKS[command](cfg)
