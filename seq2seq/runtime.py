"""Device, precision, threads and seeding: decided once at the entry point."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
from importlib.util import find_spec

import numpy as np
import torch

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def select_device(name: str) -> torch.device:
    """Resolve ``auto | cpu | cuda[:i]``; asking for CUDA without one is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "trainer.device=cuda but torch sees no CUDA device; use trainer.device=cpu "
            "or auto"
        )
    return device


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX). Elsewhere
    oneDNN emulates it, and bf16 autocast is expected to lose to fp32 (not measured:
    the project's machine has AVX512-BF16)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def check_compile_toolchain(device: torch.device) -> None:
    """Fail at start, with the fix, where torch.compile could not build kernels.

    Its default backend (inductor) writes C++ kernels on CPU, which needs a C++
    compiler, and Triton kernels on CUDA; without them the first training step would
    fail deep inside torch."""
    if device.type == "cuda":
        if find_spec("triton") is None:
            raise RuntimeError(
                "trainer.compile=true on CUDA needs Triton (pip install triton); "
                "or set trainer.compile=false"
            )
        return
    compilers = ("g++", "c++", "clang++", "cl")
    if not (os.environ.get("CXX") or any(shutil.which(c) for c in compilers)):
        raise RuntimeError(
            "trainer.compile=true on CPU needs a C++ compiler (torch.compile builds "
            "C++ kernels): install g++ or clang++, or set CXX, or set "
            "trainer.compile=false"
        )


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32. ``auto``: bf16 on CUDA, fp32 on CPU
    (bf16 on CPU is opt-in: faster where it is native, but not bit-identical)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return None
    if device.type != "cuda" and precision == "fp16":
        raise ValueError("fp16 autocast needs CUDA; use precision=fp32 or bf16 on CPU")
    if device.type == "cpu":
        limit_onednn_caches()
        if not cpu_has_native_bf16():
            log.warning(
                "precision=bf16 on a CPU without AVX512-BF16 or AMX: bf16 is emulated "
                "there and usually slower than fp32; consider precision=fp32"
            )
    return torch.bfloat16 if precision == "bf16" else torch.float16


ONEDNN_CACHE_CAPACITY = "64"


def limit_onednn_caches() -> None:
    """Cap oneDNN's and ideep's kernel caches, unless the user set them.

    bf16 matmuls on CPU go through oneDNN, which compiles and caches a kernel (with
    packed weights) per shape, up to 1,024 of each by default. Token-bucket batches
    change shape at every step: a 30-minute bf16 training grew to 3.9 GB. In a
    150-step probe, capping both at 64 took the peak from 2.2 to 1.3 GB at the same
    speed (docs/performance.md). Must run before the first bf16 matmul: both libraries
    read the variables when they build the cache."""
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        os.environ.setdefault(name, ONEDNN_CACHE_CAPACITY)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """An autocast context for ``dtype``, or a no-op context for fp32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) once, at the entry point."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


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
