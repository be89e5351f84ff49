"""Whether a checkpoint can continue this run: the same model and vocabulary.

A model setting that differs from the checkpoint's (``model.decoder.hidden_size``)
would otherwise end in torch's size-mismatch traceback, or, for a setting that keeps
the shapes (a dropout, the attention's normalizer), silently train another model.
Budget and schedule settings (``trainer.max_steps``, ``optim.lr``) may change on a
resume: that is what resuming is for.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq.config import ModelConfig, TokenizerConfig
from seq2seq.model.checkpoint import CheckpointError

# What fixes the model's shape and meaning; sampling only changes which pieces of the
# same vocabulary a training epoch sees.
COMPARED = ("model", "tokenizer")
FREE = {"tokenizer.sampling_alpha"}
SCHEMAS = {"model": ModelConfig, "tokenizer": TokenizerConfig}


def differences(saved: Any, current: Any, prefix: str) -> list[tuple[str, Any, Any]]:
    """``(key, saved value, current value)`` for every leaf that differs, by dotted
    key under ``prefix``; a key on one side only counts as differing (None there)."""
    if not (isinstance(saved, Mapping) and isinstance(current, Mapping)):
        return [] if saved == current else [(prefix.rstrip("."), saved, current)]
    out = []
    for key in sorted(set(saved) | set(current), key=str):
        out += differences(saved.get(key), current.get(key), f"{prefix}{key}.")
    return out


def with_defaults(group: str, saved: Any) -> Any:
    """A checkpoint's ``group`` config with the settings added since it was written
    at their defaults (``model.encoder.self_attention``): what rebuilding it
    (``Translator``, this resume) reads."""
    if not isinstance(saved, Mapping):
        return saved
    merged = OmegaConf.merge(OmegaConf.structured(SCHEMAS[group]), saved)
    return OmegaConf.to_container(merged, resolve=True, enum_to_str=True)


def check_resumable(
    state: dict, cfg: DictConfig, tokenizer: dict[str, bytes], path: Path
) -> None:
    """Raise ``CheckpointError`` naming every model or tokenizer key where ``state``
    (a loaded checkpoint) and this run's ``cfg`` differ, or saying that the
    vocabularies differ (``tokenizer``: this run's ``Tokenizer.to_bytes()``)."""
    current = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    saved = state.get("config", {})
    found = []
    for group in COMPARED:
        found += differences(
            with_defaults(group, saved.get(group)), current[group], f"{group}."
        )
    found = [d for d in found if d[0] not in FREE]
    fix = (
        "resume with the checkpoint's settings, or start a new run "
        "(trainer.resume=false, or another hydra.run.dir)"
    )
    if found:
        keys = ", ".join(f"{key}={old} there, {new} here" for key, old, new in found)
        raise CheckpointError(f"{path} was trained with other settings: {keys}; {fix}")
    if state.get("tokenizer") != tokenizer:
        raise CheckpointError(
            f"{path} was trained with another vocabulary (the corpus, data.*, "
            f"differs from this run's); {fix}"
        )
