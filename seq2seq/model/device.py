"""Where and in which precision a model runs: chosen once, from the config.

The trainer and the ``Translator`` resolve ``device`` and ``precision`` here, so a
model trained or decoded anywhere gets the same choice for the same settings.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F

from seq2seq.config import Precision, VocabPrecision
from seq2seq.errors import ConfigValueError, UserError
from seq2seq.model.quantized import Int8Projection, int8_available, require_int8

log = logging.getLogger(__name__)


class DeviceError(UserError, RuntimeError):
    """A device this machine does not have, or a precision it cannot run."""


def select_device(name: str) -> torch.device:
    """Resolve ``auto | cpu | cuda[:i]``; asking for CUDA without one is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise DeviceError(
            f"device {name!r}: not a device; use auto, cpu or cuda"
        ) from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(
            f"device {name!r}: torch sees no CUDA device here; use device=cpu or auto "
            "(trainer.device=... for seq2seq-train)"
        )
    return device


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX). Elsewhere
    oneDNN emulates it, and bf16 autocast is expected to lose to fp32 (not measured:
    the project's machine has AVX512-BF16)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def resolve_precision(
    precision: Precision | str, device: torch.device
) -> torch.dtype | None:
    """The autocast dtype, or None for fp32. ``auto``: bf16 on CUDA, fp32 on CPU
    (bf16 on CPU is opt-in: faster where it is native, but not bit-identical)."""
    precision = Precision(precision)
    if precision == Precision.auto:
        precision = Precision.bf16 if device.type == "cuda" else Precision.fp32
    if precision == Precision.fp32:
        return None
    if device.type != "cuda" and precision == Precision.fp16:
        raise ConfigValueError(
            "fp16 autocast needs CUDA; use precision=fp32 or bf16 on CPU"
        )
    if device.type == "cpu":
        limit_onednn_caches()
        if not cpu_has_native_bf16():
            log.warning(
                "precision=bf16 on a CPU without AVX512-BF16 or AMX: bf16 is emulated "
                "there and usually slower than fp32; consider precision=fp32"
            )
    return torch.bfloat16 if precision == Precision.bf16 else torch.float16


def resolve_vocab_dtype(
    choice: VocabPrecision | str,
    device: torch.device,
    shape: tuple[int, int] | None = None,
) -> torch.dtype | None:
    """The dtype of the search's vocabulary projection (``torch.qint8`` for int8),
    or None for the model's own (fp32, or autocast's). ``auto``, on CPU: the
    fastest of fp32, int8 (where torch has the kernels) and bf16 (where the CPU
    multiplies it natively), measured once for the projection's ``shape`` (V, in)
    (``fastest_projection``); elsewhere None: on CUDA autocast (precision=auto)
    already runs it in bf16. int8 is CPU-only and a ConfigValueError elsewhere."""
    choice = VocabPrecision(choice)
    if choice == VocabPrecision.auto:
        if device.type != "cpu" or shape is None:
            return None
        return fastest_projection(*shape, torch.get_num_threads())
    if choice == VocabPrecision.fp32:
        return None
    if choice == VocabPrecision.int8:
        require_int8(device)
        return torch.qint8
    if device.type == "cpu" and not cpu_has_native_bf16():
        _warn_emulated_vocab_bf16()
    return torch.bfloat16


LOWER_MARGIN = 1.1  # bf16 or int8 must be this much faster than fp32 to be chosen


@functools.cache
def fastest_projection(vocab: int, size: int, threads: int) -> torch.dtype | None:
    """The fastest way this CPU runs a search step's vocabulary projection (256 rows
    of ``size`` onto ``vocab``): fp32 (None), or int8 / bf16 with their best 10
    logits recomputed in fp32, as the search does, if ``LOWER_MARGIN`` times faster.
    Neither native bf16 nor int8 kernels settle it: in docs/performance.md bf16 was
    1.2–1.4× faster than fp32 on one AMD EPYC and 0.7–0.9× on an Intel Xeon with
    AVX512-BF16, and int8 1.2× in greedy search on an AVX2 AMD EPYC. 0.1–0.5 s,
    once per process, shape and thread count."""
    del threads  # a key of the cache only: the timings below use the current count
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, size, generator=gen)
    proj = torch.nn.Linear(size, vocab)
    with torch.no_grad():
        proj.weight.copy_(torch.randn(vocab, size, generator=gen))
    kinds: dict[torch.dtype | None, Callable[[Tensor], Tensor]] = {
        None: lambda x: F.linear(x, proj.weight, proj.bias)
    }
    if int8_available():
        kinds[torch.qint8] = Int8Projection(proj.weight, proj.bias)
    if cpu_has_native_bf16():
        wb, bb = proj.weight.bfloat16(), proj.bias.bfloat16()
        kinds[torch.bfloat16] = lambda x: F.linear(x.bfloat16(), wb, bb).float()

    def timed(project: Callable[[Tensor], Tensor], rescored: bool) -> float:
        def run() -> None:
            logits = project(x)
            if rescored:
                idx = logits.topk(10, dim=-1, sorted=False).indices
                exact = torch.bmm(proj.weight[idx], x.unsqueeze(-1)).squeeze(-1)
                logits.scatter_(-1, idx, exact)

        return _fastest(run)

    with torch.inference_mode():
        times = {kind: timed(fn, kind is not None) for kind, fn in kinds.items()}
    fp32 = times.pop(None)
    for kind, took in times.items():
        log.info(
            "vocab_precision=auto: %s projection ×%.2f against fp32",
            _NAMES[kind],
            fp32 / took,
        )
    best = min(times, key=times.get, default=None)
    return best if best is not None and fp32 / times[best] >= LOWER_MARGIN else None


_NAMES = {torch.qint8: "int8", torch.bfloat16: "bf16"}


def _fastest(fn: Callable[[], None], repeats: int = 5) -> float:
    """The fastest of ``repeats`` timed calls of ``fn``, after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@functools.cache
def _warn_emulated_vocab_bf16() -> None:
    """Once per process: the search resolves its precision for every batch."""
    log.warning(
        "vocab_precision=bf16 on a CPU without AVX512-BF16 or AMX: bf16 is "
        "emulated there and usually slower than fp32; consider vocab_precision=fp32"
    )


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
