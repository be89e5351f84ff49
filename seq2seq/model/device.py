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

from seq2seq.config import Precision, VocabPrecision
from seq2seq.errors import ConfigValueError, UserError

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
    """The dtype of the search's vocabulary projection, or None for the model's own
    (fp32, or autocast's). ``auto``: bf16 on a CPU that multiplies bf16 natively
    and, measured once for the projection's ``shape`` (V, in), runs it faster
    that way (``bf16_projection_pays``); elsewhere None: oneDNN would emulate bf16,
    and on CUDA autocast (precision=auto) already runs it in bf16."""
    choice = VocabPrecision(choice)
    if choice == VocabPrecision.auto:
        native = device.type == "cpu" and cpu_has_native_bf16()
        if not native or shape is None:
            return None
        pays = bf16_projection_pays(*shape, torch.get_num_threads())
        return torch.bfloat16 if pays else None
    if choice == VocabPrecision.fp32:
        return None
    if device.type == "cpu" and not cpu_has_native_bf16():
        _warn_emulated_vocab_bf16()
    return torch.bfloat16


BF16_MARGIN = 1.1  # bf16 must be this much faster to be chosen


@functools.cache
def bf16_projection_pays(vocab: int, size: int, threads: int) -> bool:
    """Whether this CPU runs a search step's vocabulary projection (256 rows of
    ``size`` onto ``vocab``, its best 10 logits recomputed in fp32, as
    ``decode.vocab_precision=bf16`` does) ``BF16_MARGIN`` times faster than fp32.
    Native bf16 does not settle it: in the searches of docs/performance.md bf16 was
    1.2–1.4× faster on an AMD EPYC and 0.7–0.9× on an Intel Xeon with AVX512-BF16.
    0.1–0.3 s, once per process, shape and thread count."""
    del threads  # a key of the cache only: the timings below use the current count
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, size, generator=gen)
    w = torch.randn(vocab, size, generator=gen)
    xb, wb = x.bfloat16(), w.bfloat16()

    def fp32() -> None:
        torch.nn.functional.linear(x, w)

    def bf16() -> None:
        logits = torch.nn.functional.linear(xb, wb).float()
        idx = logits.topk(10, dim=-1, sorted=False).indices
        logits.scatter_(-1, idx, torch.bmm(w[idx], x.unsqueeze(-1)).squeeze(-1))

    with torch.inference_mode():
        times = {fn: _fastest(fn) for fn in (fp32, bf16)}
    ratio = times[fp32] / times[bf16]
    log.info("vocab_precision=auto: bf16 projection ×%.2f against fp32", ratio)
    return ratio >= BF16_MARGIN


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
