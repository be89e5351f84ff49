"""The teacher-forcing step loop's batch and source length padded to a few sizes, so
that what is built per shape is reused: CUDA graphs (recorded per shape, under
``trainer.compile_mode=reduce-overhead``) and oneDNN's bf16 kernels (built per shape
on the CPU, ``shape_buckets.py``). The new positions are masked and the new rows
sliced away, so the outputs keep their values (``tests/test_compile.py``).

Shapes: ``T`` target steps, ``B`` batch, ``S`` source length, ``H`` decoder hidden
size, ``L`` decoder layers.
"""

from __future__ import annotations

from functools import partial

from torch import Tensor
from torch.nn import functional as F

from seq2seq.model.attention import Keys
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.shape_buckets import bucket_size


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def pad_loop_inputs(
    gates: Tensor, state: DecoderState, bucket: int | None = None
) -> tuple[Tensor, DecoderState]:
    """Pad the step loop's batch and source length up to multiples of ``bucket``, so
    that CUDA graphs (recorded per shape) are reused across token buckets; without
    ``bucket``, to ``bucket_size``'s sizes, so that oneDNN's bf16 kernels (built per
    shape) are.

    gates ``(T, B, 3H)``, state of ``B`` rows with keys ``(B, S, ·)`` → gates
    ``(T, B', 3H)`` and a state of ``B'`` rows with keys ``(B', S', ·)``. The new
    source positions are masked (their weight is exactly 0, so the real rows are
    unchanged); the new rows are zeros whose mask keeps one position, so that their
    softmax, which the caller slices away, stays finite (a NaN there would reach the
    weights' gradients through 0 · NaN)."""
    b, s = state.keys.mask.shape
    size = bucket_size if bucket is None else partial(_round_up, multiple=bucket)
    pad_b, pad_s = size(b) - b, size(s) - s
    if not pad_b and not pad_s:
        return gates, state

    def pad(x: Tensor) -> Tensor:  # (B, S, ·) → (B', S', ·)
        return F.pad(x, (0, 0, 0, pad_s, 0, pad_b))

    keys = state.keys
    values = pad(keys.values)
    mask = F.pad(keys.mask, (0, pad_s, 0, pad_b))
    mask[b:, 0] = True
    padded = Keys(
        values,
        values if keys.keys is keys.values else pad(keys.keys),
        mask,
        None if keys.projected is None else pad(keys.projected),
    )
    hidden = F.pad(state.hidden, (0, 0, 0, pad_b))  # (L, B', H)
    feed = F.pad(state.feed, (0, 0, 0, pad_b))
    return F.pad(gates, (0, 0, 0, pad_b)), DecoderState(hidden, feed, padded)


def unpad_loop_outputs(
    batch: int, source: int, weights: Tensor, heads: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """The real rows and source positions of the loop's weights ``(B', T, S')`` and
    head weights ``(B', h, T, S')``."""
    weights = weights[:batch, :, :source]
    return weights, None if heads is None else heads[:batch, ..., :source]
