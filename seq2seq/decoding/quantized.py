"""The search's vocabulary projection in int8 (``decode.vocab_precision=int8``).

The projection is most of a search step's FLOPs (8.2 of about 14 MFLOP per output
token on the reference model), and on CPU torch's fbgemm kernels multiply int8
faster than MKL multiplies fp32 at the search's row counts (docs/performance.md).
The weight is quantized once, per output row (symmetric, so each token's logits keep
their own scale); the features are quantized per call, per tensor, to 7 bits
(``reduce_range``: fbgemm's AVX2 kernel sums pairs of 8-bit products in 16 bits,
which saturate at 8). The bias is added in fp32. The search recomputes each row's
best candidates in fp32 afterwards (``vocab.LoweredProjection``).
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import Tensor

from seq2seq.errors import ConfigValueError


@functools.cache
def int8_available() -> bool:
    """Whether this torch has the CPU int8 kernels (``quantized::linear_dynamic``)."""
    ops = torch.ops.quantized
    has_ops = all(hasattr(ops, name) for name in ("linear_prepack", "linear_dynamic"))
    engines = torch.backends.quantized.supported_engines
    return has_ops and any(e in engines for e in ("x86", "fbgemm", "qnnpack", "onednn"))


def require_int8(device: torch.device) -> None:
    """A ConfigValueError unless int8 can run on ``device`` (CPU kernels only)."""
    if device.type != "cpu":
        raise ConfigValueError(
            f"vocab_precision=int8 runs on the CPU only (device {device.type!r}); "
            "use vocab_precision=fp32 or bf16 there"
        )
    if not int8_available():
        raise ConfigValueError(
            f"vocab_precision=int8: torch {torch.__version__} has no CPU int8 kernels "
            "(quantized::linear_dynamic); use vocab_precision=fp32"
        )


class Int8Projection:
    """``F.linear(x, weight, bias)`` with the weight in int8, prepacked once."""

    def __init__(self, weight: Tensor, bias: Tensor) -> None:
        weight = weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp_min(1e-8) / 127.0
        zero = torch.zeros(weight.size(0), dtype=torch.long)
        with warnings.catch_warnings():
            # torch 2.13 marks quantized tensors as deprecated in favour of torchao;
            # the kernels are what this needs, and a user can do nothing about it.
            warnings.filterwarnings("ignore", message=".*quantized tensor creation")
            qweight = torch.quantize_per_channel(
                weight, scale.double(), zero, 0, torch.qint8
            )
        self._packed = torch.ops.quantized.linear_prepack(
            qweight, bias.detach().float()
        )

    def __call__(self, x: Tensor) -> Tensor:
        """x ``(N, in)`` float32 → logits ``(N, V)`` float32."""
        return torch.ops.quantized.linear_dynamic(x.contiguous(), self._packed, True)
