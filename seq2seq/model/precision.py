"""Cast once per batch what autocast would otherwise cast at every decoder step.

Autocast casts an fp32 matmul operand to bf16/fp16 at each call. It caches the cast
of a leaf parameter for the whole autocast region, but not of anything else: the
``StackedGRU`` weight views and the attention memory are recast at every time step,
forward (a copy) and backward (a copy back), which was 11 % of a bf16 training step
of the reference model on CPU. ``cast_like_autocast`` makes that cast once per
batch, as autocast's own cache does for parameters: the values are the same, and the
per-step gradients sum in the autocast dtype before the one cast back to fp32.
"""

from __future__ import annotations

import torch
from torch import Tensor


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype autocast runs matmuls in on ``device`` right now, or None (off)."""
    kind = device.type
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        enabled, dtype = torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)
    elif kind == "cpu":
        enabled, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
    else:
        enabled, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
    return dtype if enabled else None


def cast_like_autocast(tensor: Tensor | None) -> Tensor | None:
    """``tensor`` in the active autocast dtype (a float32 tensor only), else as is."""
    if tensor is None or tensor.dtype != torch.float32:
        return tensor
    dtype = autocast_dtype(tensor.device)
    return tensor if dtype is None else tensor.to(dtype)
