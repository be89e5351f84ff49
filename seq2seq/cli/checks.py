"""The rules that evaluate, translate, align and distill share: the checkpoints they
read, their decoding overrides, a reverse checkpoint (a model trained the other way)
for symmetrized word alignments, and a checkpoint's corpus with ``data.*`` on top.

Each command's own rules stand in its module (``check_evaluate`` in ``evaluate.py``,
...); these run inside them, right after composition, so a missing checkpoint is
named before torch is even imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq.config import Corpus
from seq2seq.config_checks import (
    AT_LEAST_1,
    BEAM,
    FRACTION,
    NON_NEGATIVE,
    check_data,
    check_device,
    check_values,
    require,
    require_file,
)


def checkpoint_paths(value: Any) -> list[str]:
    """``checkpoint=PATH`` or ``checkpoint=[A,B]`` (an ensemble) as a list of paths."""
    if isinstance(value, str | Path):
        return [str(value)]
    return [str(p) for p in value]


def _check_files(key: str, value: Any, hint: str) -> None:
    """``key`` names one file or a list of them (an ensemble), each existing."""
    paths = checkpoint_paths(value)
    require(bool(paths), f"{key}=[]: give at least one checkpoint")
    for path in paths:
        require_file(key, path, hint)


def check_decoding_overrides(cfg: DictConfig) -> None:
    """The checkpoint and decoding keys of evaluate, translate and align (None: the
    checkpoint's)."""
    hint = "give a best.pt or last.pt written by seq2seq-train"
    _check_files("checkpoint", cfg.checkpoint, hint)
    check_device(cfg.device, "device")
    rules = {"beam_size": BEAM, "batch_tokens": AT_LEAST_1}
    for key in ("length_penalty", "coverage_penalty"):
        if key in cfg:
            rules[key] = NON_NEGATIVE
    check_values(cfg, "", rules)


def check_reverse_file(cfg: DictConfig) -> None:
    """``reverse_checkpoint``, when set: a path or a list (an ensemble) of files;
    and the ``two_way`` readout's settings."""
    rules = {
        "lexicon": FRACTION,
        "lexicon_iterations": AT_LEAST_1,
        "floor": FRACTION,
        "add": (lambda v: 0 < v <= 1, "must be in (0, 1], or null for none"),
    }
    check_values(cfg.two_way, "two_way.", rules)
    if cfg.reverse_checkpoint is not None:
        hint = "give a best.pt of a model trained the other way on the same corpus"
        _check_files("reverse_checkpoint", cfg.reverse_checkpoint, hint)


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
        pb = data.phrasebook
        phrasebook = (pb.train_size, pb.validation_size, pb.test_size, pb.seed)
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
    require(
        swapped and _corpus_key(reverse) == _corpus_key(forward),
        f"reverse_checkpoint={reverse_name} ({corpus_summary(reverse)}) is not "
        f"checkpoint={forward_name} ({corpus_summary(forward)}) read the other way: "
        "give a model trained on the same corpus with data.src_lang and "
        "data.tgt_lang swapped",
    )


def _set_fields(overrides: DictConfig) -> dict[str, Any]:
    """The fields the user set (not None), nested tables included."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, DictConfig):
            value = _set_fields(value) or None
        if value is not None:
            out[str(key)] = value
    return out


def corpus_settings(checkpoint_data: DictConfig, overrides: DictConfig) -> DictConfig:
    """The checkpoint's ``data`` with the user's ``data.*`` overrides on top, checked
    like ``seq2seq-train``'s (a phrasebook pair, a ``local`` corpus's folder)."""
    data = OmegaConf.merge(checkpoint_data, _set_fields(overrides))
    check_data(data)
    return data
