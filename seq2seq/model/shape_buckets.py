"""Matmul shapes that repeat, for bf16 on the CPU.

Under CPU autocast, bf16 matmuls run through oneDNN, which builds (JIT-compiles) a
kernel for each new shape and caches it: on an Intel Xeon with AMX, building one for
the vocabulary projection of a 1,500-row batch takes about 25 ms, running it 4 ms;
a GRU step's ``(135 × 512) @ (512 × 1536)`` takes 6.5 ms to build and 0.34 ms to run.
Token-bucket batches give every step new row counts (target tokens, batch size), so
an unpadded bf16 step spends more time building kernels than running them. Padding
the rows of the matmuls whose row count follows the batch up to one of eight sizes
per octave (``bucket_size``: at most 1/8 more rows, 1/16 on average) lets a few
dozen kernels serve a whole training. fp32 matmuls (MKL) build nothing per shape,
so nothing is padded there; the attention's products, whose batch, target and source
lengths all vary and whose FLOPs are few, run in fp32 (``bmm_varying``).

The kernels must also stay built: oneDNN's kernel cache holds as many as a run's
buckets make (``model/device.py``, ``size_onednn_caches``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F

from seq2seq.data.tokenizer import PAD_ID
from seq2seq.model.precision import autocast_dtype, cast_like_autocast

# Sizes up to this are used as they are (a bucket would save no kernel)
SMALLEST_BUCKETED = 16


def bucket_size(n: int) -> int:
    """``n`` rounded up to the next of eight sizes per octave: ..., 128, 144, 160,
    ..., 240, 256, 288, ... (a multiple of 2^(⌊log2 n⌋ − 3)); ``n`` itself up to 16."""
    if n <= SMALLEST_BUCKETED:
        return n
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


def buckets_active(device: torch.device) -> bool:
    """Whether matmul rows are padded to buckets here: under bf16 or fp16 autocast on
    the CPU (oneDNN's kernels per shape), and nowhere else."""
    return device.type == "cpu" and autocast_dtype(device) is not None


def pad_dim(x: Tensor, dim: int, size: int, value: float = 0.0) -> Tensor:
    """``x`` padded at the end of ``dim`` to ``size`` with ``value``. One ``cat``
    writes the result once, where ``F.pad`` fills all of it and then copies ``x`` in
    (a third faster for a GRU layer's input gates)."""
    extra = size - x.size(dim)
    if extra <= 0:
        return x
    shape = list(x.shape)
    shape[dim] = extra
    return torch.cat([x, x.new_full(shape, value)], dim)


def rows_in_buckets(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """``fn(x)`` for a row-wise ``fn`` (its rows: all leading dimensions together),
    with the rows padded to ``bucket_size`` where ``buckets_active``; the padding's
    outputs are dropped, so values and gradients are ``fn``'s."""
    if not buckets_active(x.device):
        return fn(x)
    flat = x.reshape(-1, x.size(-1))
    rows = flat.size(0)
    out = fn(pad_dim(flat, 0, bucket_size(rows)))
    return out[:rows].reshape(*x.shape[:-1], out.size(-1))


def linear_rows(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``, its rows in buckets (``rows_in_buckets``)."""
    return rows_in_buckets(lambda rows: F.linear(rows, weight, bias), x)


def pad_loss_rows(features: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """The output layer's features ``(N, F)`` and targets ``(N,)`` with N padded to
    ``bucket_size`` where ``buckets_active``: zero features, PAD targets, which the
    loss skips, so the loss and its gradients are those of the unpadded rows."""
    if not buckets_active(features.device):
        return features, targets
    rows = bucket_size(features.size(0))
    return pad_dim(features, 0, rows), pad_dim(targets, 0, rows, value=PAD_ID)


def bmm_varying(a: Tensor, b: Tensor) -> Tensor:
    """``torch.bmm(a, b)`` for products whose every dimension follows the batch (the
    attention's scores and context: batch, target and source lengths): where
    ``buckets_active``, in fp32 (MKL builds no kernel per shape; these products are
    small), else as autocast runs it."""
    if not buckets_active(a.device):
        return torch.bmm(a, b)
    with torch.autocast(a.device.type, enabled=False):
        return torch.bmm(a.float(), b.float())


def varying_operand(x: Tensor) -> Tensor:
    """An operand that ``bmm_varying`` reads at every step (the attention's values
    and dot-product keys), cast once per batch to the dtype it computes in: fp32
    where ``buckets_active`` (so no step casts it again), else autocast's dtype."""
    if buckets_active(x.device):
        return x.float()
    return cast_like_autocast(x)
