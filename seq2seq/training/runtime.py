"""Seeds, threads, CUDA flags, RNG state, signals and the compile toolchain: decided
once at the entry point of a training run."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
from collections.abc import Mapping
from importlib.util import find_spec
from typing import Any

import numpy as np
import torch

from seq2seq.errors import UserError

log = logging.getLogger(__name__)


class ToolchainError(UserError, RuntimeError):
    """``trainer.compile=true`` where torch.compile could not build its kernels."""


def check_compile_toolchain(device: torch.device) -> None:
    """Fail at start, with the fix, where torch.compile could not build kernels.

    Its default backend (inductor) writes C++ kernels on CPU, which needs a C++
    compiler, and Triton kernels on CUDA; without them the first training step would
    fail deep inside torch."""
    missing = missing_toolchain(device)
    if missing:
        raise ToolchainError(
            f"trainer.compile=true {missing}; or set trainer.compile=false"
        )


def missing_toolchain(device: torch.device) -> str | None:
    """What torch.compile lacks on ``device`` to build kernels, or None."""
    if device.type == "cuda":
        if find_spec("triton") is None:
            return "on CUDA needs Triton (pip install triton)"
        return None
    compilers = ("g++", "c++", "clang++", "cl")
    if not (os.environ.get("CXX") or any(shutil.which(c) for c in compilers)):
        return (
            "on CPU needs a C++ compiler (torch.compile builds C++ kernels): "
            "install g++ or clang++, or set CXX"
        )
    return None


def compile_scope(switch: str, device: torch.device) -> tuple[str, str]:
    """What ``trainer.compile`` (auto, true or false) compiles on ``device``, and why:
    ``"all"`` (every step taken by hand), ``"recurrence"`` (the deep GRU's recurrent
    steps) or ``"none"``. ``auto`` compiles the recurrence where it was measured to win
    (a CPU: ×1.06 in fp32 and ×1.13 in bf16 on the en→de recipe's model,
    ``docs/performance.md``) and can build kernels; the decoder's step loop wins
    nothing on a CPU, and the GPU has no measurement yet."""
    if switch == "true":
        check_compile_toolchain(device)
        return "all", "trainer.compile=true"
    if switch == "false":
        return "none", "trainer.compile=false"
    if device.type != "cpu":
        return (
            "none",
            "auto: compiled steps are not measured on CUDA yet; "
            "trainer.compile=true compiles them",
        )
    missing = missing_toolchain(device)
    if missing:
        return "none", f"auto: eager, since torch.compile {missing}"
    return "recurrence", "auto: they win on a CPU with a C++ compiler"


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) once, at the entry point."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch CPU and CUDA generator states, safe for ``weights_only``."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "state": list(internal), "gauss": gauss},
        "numpy": {
            "name": str(name),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` captured (missing parts are left alone)."""
    if "python" in state:
        py = state["python"]
        random.setstate((int(py["version"]), tuple(py["state"]), py["gauss"]))
    if "numpy" in state:
        npy = state["numpy"]
        # a checkpoint loaded onto a GPU holds its tensors there: to the host first
        keys = np.asarray(torch.as_tensor(npy["keys"]).cpu().numpy(), dtype=np.uint32)
        np.random.set_state(
            (npy["name"], keys, npy["pos"], npy["has_gauss"], npy["cached_gaussian"])
        )
    if "torch" in state:
        torch.set_rng_state(torch.as_tensor(state["torch"], dtype=torch.uint8).cpu())
    if "cuda" in state:
        cuda = [torch.as_tensor(s, dtype=torch.uint8).cpu() for s in state["cuda"]]
        if torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
            torch.cuda.set_rng_state_all(cuda)
        else:
            log.warning(
                "checkpoint has CUDA RNG states for %d devices; this process sees %d: "
                "CUDA random streams are not restored",
                len(cuda),
                torch.cuda.device_count() if torch.cuda.is_available() else 0,
            )


def configure_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)


def configure_cuda(device: torch.device) -> None:
    """Let cuDNN pick fast kernels and matmuls use TF32 on CUDA."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


class StopRequested:
    """Turns SIGINT / SIGTERM into a flag the loop checks after each step."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequested:
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Outside the main thread signals cannot be caught: leave them alone.
            with contextlib.suppress(ValueError):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        log.warning(
            "signal %d: finishing the current step, then saving last.pt", signum
        )
        self.requested = True

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
