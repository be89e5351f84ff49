"""Checkpoints: atomic save, safe load, library versions, averaging.

An average (``write_average``) is an inference checkpoint: the newest input's config,
tokenizer and step with the averaged weights, and no optimizer or sampler state,
because no training run ever reached those weights and resuming from them would lie.

A checkpoint is one self-contained ``torch.save`` file holding only what
``torch.load(..., weights_only=True)`` accepts: tensors, plain containers, numbers,
strings and ``bytes`` (so the tokenizer's model bytes are stored as they are).
Keys: ``format="seq2seq-checkpoint"``, ``format_version``, ``model``, ``config``,
``tokenizer``, ``optimizer``, ``scheduler``, ``scaler``, ``step``, ``epoch``, ``rng``,
``sampler``, ``best_metric``, ``versions``.
"""

from __future__ import annotations

import errno
import logging
import os
import platform
import shutil
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from seq2seq.disk import raise_if_refused, refusal, refused_error
from seq2seq.errors import UserError
from seq2seq.model.pickles import check_weights_only_safe, unsafe_globals

log = logging.getLogger(__name__)

FORMAT = "seq2seq-checkpoint"
FORMAT_VERSION = 1


class CheckpointError(UserError, RuntimeError):
    """A checkpoint that is missing, truncated, corrupt, foreign, unsafe or too new,
    or one that could not be written (a full disk)."""


# ------------------------------------------------------------------ save / load


def save_checkpoint(path: str | os.PathLike, state: Mapping[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically and return the path.

    The file is written to a temporary file in the same folder, flushed and fsynced,
    then renamed over ``path`` and the folder is fsynced: a crash at any point leaves
    either the previous checkpoint or the new one, never a partial file, and a full
    disk (or a quota, or a read-only file system) raises ``CheckpointError`` saying
    so, with the free space there (the temporary file removed). ``format``,
    ``format_version`` and ``versions`` are filled in when ``state`` lacks them.
    """
    path = Path(path)
    state = dict(state)
    if state.setdefault("format", FORMAT) != FORMAT:
        raise ValueError(f"state['format'] is {state['format']!r}, expected {FORMAT!r}")
    state.setdefault("format_version", FORMAT_VERSION)
    state.setdefault("versions", library_versions())
    check_weights_only_safe(state)
    kept = "the previous one is unchanged" if path.exists() else "none written"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
        )
    except OSError as err:
        _raise_if_refused(err, path, kept)
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException as err:
        full = isinstance(err, Exception) and _torch_full(err, path.parent)
        Path(tmp_name).unlink(missing_ok=True)
        if full:
            raise refused_error(
                errno.ENOSPC, path, *_WHAT, kept, CheckpointError
            ) from err
        if isinstance(err, Exception):
            _raise_if_refused(err, path, kept)
        raise
    _fsync_dir(path.parent)
    log.debug("saved checkpoint %s", path)
    return path


_WHAT = ("checkpoint", "write elsewhere (hydra.run.dir=DIR; seq2seq-average -o PATH)")


def _raise_if_refused(err: BaseException, path: Path, kept: str) -> None:
    raise_if_refused(err, path, *_WHAT, note=kept, kind=CheckpointError)


def _torch_full(err: BaseException, folder: Path) -> bool:
    """torch reports a failed write as ``RuntimeError: [enforce fail at
    inline_container.cc:...] unexpected pos``, usually with the ``OSError`` of the
    write as its context (which ``refusal`` finds); without it, an "unexpected pos"
    on an all but full file system (checked before the temporary file is removed)
    means a full disk too."""
    if refusal(err) is not None or "unexpected pos" not in str(err):
        return False
    try:
        return shutil.disk_usage(folder).free < _NEARLY_FULL
    except OSError:
        return False


_NEARLY_FULL = 1 << 20  # bytes


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable; not possible (nor needed) on every platform."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` with ``weights_only=True``.

    Raises:
        CheckpointError: the file is missing, empty, truncated or corrupt, unsafe
            (its pickle imports code), is not a seq2seq checkpoint, or was written
            by a newer format version.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist (or is not a file)")
    if path.stat().st_size == 0:
        raise CheckpointError(
            f"checkpoint {path} is empty (0 bytes): an interrupted copy? copy it again"
        )
    if not zipfile.is_zipfile(path):  # not what save_checkpoint writes: look first
        _refuse_unsafe(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # pickle raises anything (KeyError, EOFError, ...)
        _refuse_unsafe(path)
        raise _unreadable(path, err) from err
    _check_header(path, state)
    return state


def _refuse_unsafe(path: Path) -> None:
    """Raise when the file's pickle imports something ``weights_only`` never runs."""
    unsafe = unsafe_globals(path)
    if unsafe:
        raise CheckpointError(
            f"checkpoint {path} is unsafe and was not loaded: its pickle would import "
            f"{', '.join(unsafe[:3])} (code that weights_only loading refuses to "
            "run); use only checkpoints written by seq2seq-train that you trust"
        )


def _unreadable(path: Path, err: BaseException) -> CheckpointError:
    """Why ``torch.load`` refused a file that is not unsafe: truncated or corrupt,
    or not a PyTorch file."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic == b"PK\x03\x04":
        what = "is truncated or corrupt (a PyTorch zip file that cannot be read)"
        fix = "copy it again, or use the run's other checkpoint"
    else:
        what = "is not a PyTorch checkpoint (foreign or corrupt file)"
        fix = "give a best.pt or last.pt written by seq2seq-train"
    return CheckpointError(
        f"checkpoint {path} ({size} bytes) {what}: {_reason(err)}; {fix}"
    )


def _reason(err: BaseException) -> str:
    """The informative line of a torch/pickle error, prefixed by its type."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    marker = "WeightsUnpickler error:"
    at = next((k for k, line in enumerate(lines) if marker in line), None)
    if at is None:
        text = lines[0] if lines else ""
    else:  # the detail follows the marker, on its line or the next one
        text = lines[at].split(marker, 1)[1].strip()
        if not text and at + 1 < len(lines):
            text = lines[at + 1]
    return f"{type(err).__name__}: {text[:200]}"


def _check_header(path: Path, state: Any) -> None:
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(
            f"{path} is a valid torch file but not a seq2seq checkpoint "
            f"(format={found!r}, expected {FORMAT!r})"
        )
    version = state.get("format_version")
    if not isinstance(version, int):
        raise CheckpointError(f"{path} has no integer format_version ({version!r})")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format_version {version}, newer than this seq2seq supports "
            f"({FORMAT_VERSION}); upgrade seq2seq to load it"
        )


# ------------------------------------------------------------------ misc


def library_versions() -> dict[str, str]:
    """Versions that make a checkpoint's results reproducible."""
    versions = {"python": platform.python_version(), "torch": str(torch.__version__)}
    for name in ("sentencepiece", "sacrebleu", "seq2seq"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def average_checkpoints(paths: Sequence[str | os.PathLike]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the ``model`` weights of several checkpoints.

    Floating-point tensors are averaged (accumulated in float64, cast back); other
    tensors (integer buffers such as BatchNorm's counters) come from the last one.
    All checkpoints must share the model's keys, its config and the tokenizer.
    """
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint path")
    total: dict[str, torch.Tensor] = {}
    last: dict[str, torch.Tensor] = {}
    reference: tuple = ()
    for k, path in enumerate(paths):
        state = load_checkpoint(path)
        model = state["model"]
        tokenizer, model_config = (
            state.get("tokenizer"),
            state.get("config", {}).get("model"),
        )
        if k and set(model) != set(last):
            diff = sorted(set(model) ^ set(last))
            raise CheckpointError(f"{path} has different model keys: {diff[:5]}")
        if k and tokenizer != reference[0]:
            raise CheckpointError(
                f"{path} and {paths[0]} use different tokenizers: only checkpoints of "
                "one model and vocabulary can be averaged"
            )
        if k and model_config != reference[1]:
            raise CheckpointError(
                f"{path} and {paths[0]} have different model configs: only "
                "checkpoints of one model can be averaged"
            )
        reference = reference or (tokenizer, model_config)
        for name, tensor in model.items():
            if tensor.is_floating_point():
                acc = tensor.to(torch.float64)
                total[name] = acc if k == 0 else total[name] + acc
        last = model
    averaged = {}
    for name, tensor in last.items():
        if name in total:
            averaged[name] = (total[name] / len(paths)).to(tensor.dtype)
        else:
            averaged[name] = tensor
    log.info("averaged %d checkpoints", len(paths))
    return averaged


# What evaluate, translate and align read; the training state is left behind.
_INFERENCE_KEYS = ("config", "tokenizer", "step", "epoch", "best_metric")


def write_average(
    paths: Sequence[str | os.PathLike], output: str | os.PathLike
) -> Path:
    """Average the ``model`` weights of ``paths`` into a new checkpoint at ``output``.

    Raises:
        CheckpointError: a path is not a checkpoint, the checkpoints come from
            different models or tokenizers, or ``output`` is one of the inputs.
    """
    paths = [Path(p) for p in paths]
    output = Path(output)
    if not paths:
        raise CheckpointError("seq2seq-average needs at least one checkpoint")
    if output.resolve() in {p.resolve() for p in paths}:
        raise CheckpointError(
            f"{output} is one of the inputs: write the average elsewhere"
        )
    weights = average_checkpoints(paths)
    newest = load_checkpoint(paths[-1])
    state = {key: newest[key] for key in _INFERENCE_KEYS if key in newest}
    state["model"] = weights
    state["averaged_from"] = [str(p) for p in paths]
    return save_checkpoint(output, state)
