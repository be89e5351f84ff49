"""Where and in which precision a model runs: chosen once, from the config.

The trainer and the ``Translator`` resolve ``device`` and ``precision`` here, so a
model trained or decoded anywhere gets the same choice for the same settings.
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch

from seq2seq.config import Precision
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


# oneDNN's ISA names in order (ONEDNN_MAX_CPU_ISA); a cap lets oneDNN use the
# instructions up to and including it
_ONEDNN_ISAS = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX10_1_512",
    "AVX512_CORE_FP16",
    "AVX10_1_512_AMX",
    "AVX512_CORE_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX512_CORE_AMX_FP16",
)


def _onednn_allows(isa: str) -> bool:
    """Whether ``ONEDNN_MAX_CPU_ISA`` (unset, ``ALL`` or ``DEFAULT``: no cap) lets
    oneDNN use ``isa``."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in ("", "ALL", "DEFAULT") or cap not in _ONEDNN_ISAS:
        return True
    return _ONEDNN_ISAS.index(cap) >= _ONEDNN_ISAS.index(isa)


def native_bf16_isa() -> str | None:
    """The instruction set with which this CPU multiplies bf16 in hardware (``AMX``,
    else ``AVX512-BF16``), or None: there oneDNN emulates bf16 and bf16 autocast
    loses to fp32.

    A run capped below it (``ATEN_CPU_CAPABILITY=avx2`` or ``default``,
    ``ONEDNN_MAX_CPU_ISA``) gets None, as the CPU it stands for would: the cap is how
    an AVX2-only machine is tried on a newer one, and its choices (``precision=auto``
    trains fp32 there) must be that machine's."""
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return None
    amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    if amx and _onednn_allows("AVX512_CORE_AMX"):
        return "AMX"
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
    if avx512_bf16 and _onednn_allows("AVX512_CORE_BF16"):
        return "AVX512-BF16"
    return None


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AMX or AVX512-BF16)."""
    return native_bf16_isa() is not None


def auto_precision(
    device: torch.device, decoding: bool = False
) -> tuple[Precision, str]:
    """What ``precision=auto`` means on ``device``, and why (one clause, for the
    start-up line). Training: bf16 autocast wherever the hardware computes it (CUDA,
    and CPUs with AMX or AVX512-BF16, where it trained the reference and recipe
    models ×1.04–1.37 faster; the quickstart's model, too small to gain, pins fp32),
    fp32 elsewhere. Decoding on a CPU: fp32, since a search's small per-step matmuls
    ran slower in bf16 even with AMX (docs/performance.md)."""
    if device.type == "cuda":
        return Precision.bf16, "CUDA computes bf16 natively"
    if decoding:
        return Precision.fp32, "bf16 decoding is slower than fp32 on a CPU"
    isa = native_bf16_isa()
    if device.type == "cpu" and isa is not None:
        return Precision.bf16, f"this CPU computes bf16 natively ({isa})"
    return Precision.fp32, "this CPU has neither AMX nor AVX512-BF16"


def resolve_precision(
    precision: Precision | str, device: torch.device, decoding: bool = False
) -> torch.dtype | None:
    """The autocast dtype, or None for fp32, to train in (or, ``decoding``, to
    search in). ``auto``: see ``auto_precision``; ``fp32`` is the bit-exact choice
    (exact resume, code paths compared)."""
    precision = Precision(precision)
    if precision == Precision.auto:
        precision, why = auto_precision(device, decoding)
        # training says it at start; a decoding command's stderr keeps to its result
        say = log.debug if decoding else log.info
        task = "decoding" if decoding else "training"
        say("precision=auto: %s %s, since %s", task, precision.value, why)
    if precision == Precision.fp32:
        return None
    if device.type != "cuda" and precision == Precision.fp16:
        raise ConfigValueError(
            "fp16 autocast needs CUDA; use precision=fp32 or bf16 on CPU"
        )
    if device.type == "cpu":
        size_onednn_caches()
        if not cpu_has_native_bf16():
            log.warning(
                "precision=bf16 on a CPU without AVX512-BF16 or AMX: bf16 is emulated "
                "there and usually slower than fp32; consider precision=fp32"
            )
    return torch.bfloat16 if precision == Precision.bf16 else torch.float16


# oneDNN's kernels kept built: a bf16 run's matmul shapes, few thanks to the shape
# buckets (about 330 for the en→de recipe), with room to spare
ONEDNN_KERNELS = "1024"
# ideep's cache of packed weights: capping it cost no speed and saved memory
IDEEP_CACHE = "64"


def size_onednn_caches() -> None:
    """Size oneDNN's and ideep's kernel caches for bf16 on a CPU, unless the user set
    them.

    bf16 matmuls on a CPU go through oneDNN, which builds (JIT-compiles) and caches a
    kernel per shape. The shape buckets (``model/shape_buckets.py``) keep a run's
    shapes to a few hundred; a cache smaller than that rebuilds kernels at every step
    (at 64 entries, about 15 builds and 25 ms a step of the en→de recipe's model in
    bf16), while ideep's cache, capped at 64, saved memory at no cost
    (docs/performance.md, Memory). Must run before the first bf16 matmul: both
    libraries read the variables when they build their caches."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_KERNELS)
    os.environ.setdefault("LRU_CACHE_CAPACITY", IDEEP_CACHE)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """An autocast context for ``dtype``, or a no-op context for fp32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
