"""A GRU layer's whole time loop as one autograd function, with a hand-written backward.

Under autograd each time step of ``DeepGRU`` records about a dozen nodes (a matmul,
the gates' splits, sigmoids, products, the mask), and its backward multiplies the
weight gradient of every step separately: T small ``(H × B) @ (B × 3H)`` products,
each summed into the weight's gradient. Marian and cuDNN instead step the backward
by hand and leave the weight gradient for one product over all steps. This module
does the same for ``DeepGRU`` without layer norm (deep transition, both directions
batched, padding masks):

Forward, for each step t and transition d (d = 0 takes the hoisted input gates
``gi_t``, d ≥ 1 only its input-side bias)::

    gh = U_d h + b^h_d
    r, z = σ(gi_r + gh_r), σ(gi_z + gh_z)      n = tanh(gi_n + r ⊙ gh_n)
    h' = n + z ⊙ (h − n)

then the padding mask m_t: the output is ``h' ⊙ m_t`` and the carried state
``where(m_t, h', h_{t−1})``. Backward, from g = ∂L/∂h' of each transition, last to
first::

    ∂a_n = g ⊙ (1 − z) ⊙ (1 − n²)
    ∂a_z = g ⊙ (h − n) ⊙ z (1 − z)      ∂a_r = ∂a_n ⊙ gh_n ⊙ r (1 − r)
    ∂gi = [∂a_r, ∂a_z, ∂a_n]             ∂gh = [∂a_r, ∂a_z, ∂a_n ⊙ r]
    ∂h = g ⊙ z + ∂gh U_dᵀ

and after the loop ``∂U_d = Σ_t h_tᵀ ∂gh_t`` as one batched matmul over all T·B rows,
``∂b^h_d = Σ ∂gh``, ``∂b^i_d = Σ ∂gi`` (d ≥ 1). It computes what autograd computes
(``tests/test_gru_recurrence.py`` compares values and gradients in float64), in
fewer, larger kernels. Double backward is not supported (training needs none).
Under CPU bf16 autocast the batch, and the weight gradient's T·B rows, are padded to
``bucket_size`` (``model/shape_buckets.py``: oneDNN builds a kernel per shape).

Shapes: ``D`` directions, ``T`` steps, ``B`` batch, ``H`` hidden size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seq2seq.model.shape_buckets import bucket_size, buckets_active, pad_dim


def gru_layer(
    gi: Tensor,
    h0: Tensor,
    masks: Tensor | None,
    weights: list[Tensor],
    input_biases: list[Tensor],
    hidden_biases: list[Tensor],
) -> tuple[Tensor, Tensor]:
    """A layer's recurrence over all steps: gi ``(D, T, B, 3H)`` (input gates, biases
    in, each direction in its own time order), h0 ``(D, B, H)``, masks ``(D, T, B,
    1)`` bool (True: a real step) or None, and per transition d its recurrent weight
    ``(D, H, 3H)`` (already transposed, in autocast's dtype), input-side bias ``(D, 1,
    3H)`` (d ≥ 1; ignored for d = 0) and recurrent bias ``(D, 1, 3H)`` → outputs ``(D,
    T, B, H)`` (zeros at padding) and the final states ``(D, B, H)``."""
    depth = len(weights)
    params = (*weights, *input_biases[1:], *hidden_biases)
    batch = h0.size(1)
    bucket = buckets_active(gi.device)
    if bucket:  # padded rows run as real steps from zeros; their results are dropped
        size = bucket_size(batch)
        gi, h0 = pad_dim(gi, 2, size), pad_dim(h0, 1, size)
        if masks is not None:
            masks = torch.cat(
                [masks, masks.new_ones(*masks.shape[:2], size - batch, 1)], 2
            )
    if torch.is_grad_enabled() and any(t.requires_grad for t in (gi, h0, *params)):
        out, h = GRURecurrence.apply(gi, h0, masks, depth, bucket, *params)
    else:
        out, h, _ = _recurrence(gi, h0, masks, depth, params, save=False)
    return out[:, :, :batch], h[:, :batch]


def _recurrence(
    gi: Tensor,
    h0: Tensor,
    masks: Tensor | None,
    depth: int,
    params: tuple[Tensor, ...],
    save: bool,
) -> tuple[Tensor, Tensor, list[list[tuple[Tensor, ...]]]]:
    """The forward loop; with ``save``, also what the backward needs, per transition
    and step: the state the transition started from (in the matmul's dtype) and A,
    Bz, C, r, z."""
    weights = params[:depth]
    input_biases = params[depth : 2 * depth - 1]
    hidden_biases = params[2 * depth - 1 :]
    size = h0.size(-1)
    one = h0.new_ones(())
    # cast once, not at every step: the biases to the matmul's dtype, the masks to
    # the state's (a bool factor would be cast at each product)
    hidden_biases = [b.to(w.dtype) for b, w in zip(hidden_biases, weights, strict=True)]
    keep = masks.to(h0.dtype) if masks is not None else None
    h, outs = h0, []
    saved: list[list[tuple[Tensor, ...]]] = [[] for _ in range(depth)]
    for t, gi_t in enumerate(gi.unbind(1)):
        new = h
        for d in range(depth):
            w = weights[d]
            # the gates in the state's dtype: one cast of gh (bf16 under autocast)
            # instead of one in each element-wise op that mixes it with fp32
            start = new.to(w.dtype)  # the matmul's operand, saved as is for ∂U
            gh = torch.baddbmm(hidden_biases[d], start, w).to(new.dtype)
            gi_d = gi_t if d == 0 else input_biases[d - 1]
            gi_rz, gi_n = gi_d.split((2 * size, size), -1)
            gh_rz, gh_n = gh.split((2 * size, size), -1)
            gates = torch.sigmoid(gi_rz + gh_rz)
            r, z = gates.chunk(2, -1)
            n = torch.tanh(torch.addcmul(gi_n, r, gh_n))
            h_minus_n = new - n
            if save:
                slopes = torch.addcmul(gates, gates, gates, value=-1)  # σ(1 − σ)
                slope_r, slope_z = slopes.chunk(2, -1)
                a = torch.addcmul(one, n, n, value=-1).mul_(1 - z)
                saved[d].append(
                    (start, a, h_minus_n * slope_z, slope_r.mul_(gh_n), r, z)
                )
            new = torch.addcmul(n, z, h_minus_n)
        if masks is not None:
            new = new * keep[:, t]
            h = torch.where(masks[:, t], new, h)
        else:
            h = new
        outs.append(new)
    return torch.stack(outs, 1), h, saved


class GRURecurrence(torch.autograd.Function):
    """``gru_layer``'s autograd function (see the module docstring).

    The forward saves, per transition and step, the state it started from (as the
    matmul read it: bf16 under autocast, half the memory) and the four products the
    backward multiplies by (``A = (1 − z)(1 − n²)``, ``Bz = (h − n) z(1 − z)``, ``C =
    gh_n r(1 − r)``, and r, z): the backward is then four products into preallocated
    gradient buffers, one matmul and one ``addcmul`` a step."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        gi: Tensor,
        h0: Tensor,
        masks: Tensor | None,
        depth: int,
        bucket: bool,
        *params: Tensor,
    ) -> tuple[Tensor, Tensor]:
        out, h, saved = _recurrence(gi, h0, masks, depth, params, save=True)
        ctx.depth, ctx.gi_dtype, ctx.has_masks = depth, gi.dtype, masks is not None
        ctx.bucket = bucket
        ctx.save_for_backward(
            masks if masks is not None else gi.new_empty(0),
            *params[:depth],
            *(x for transition in saved for step in transition for x in step),
        )
        return out, h

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any, d_out: Tensor, d_final: Tensor
    ) -> tuple[Tensor | None, ...]:
        depth = ctx.depth
        masks, *rest = ctx.saved_tensors
        masks = masks if ctx.has_masks else None
        weights, rest = rest[:depth], rest[depth:]
        dirs, steps, batch, size = d_out.shape
        per_step = len(rest) // (depth * steps)
        saved = [
            [rest[(d * steps + t) * per_step :][:per_step] for t in range(steps)]
            for d in range(depth)
        ]
        # ∂gh of every transition and step, and ∂a_n (∂gi_n) beside it; step-major,
        # so that each step's block is contiguous for its matmul
        d_gh = d_out.new_empty(depth, steps, dirs, batch, 3 * size)
        d_an = d_out.new_empty(depth, steps, dirs, batch, size)
        # Uᵀ contiguous once, not transposed in every step's matmul
        weights_t = [w.transpose(1, 2).contiguous() for w in weights]
        if masks is not None:
            keep = masks.to(d_out.dtype)
            drop = 1 - keep
        dh = d_final
        for t in reversed(range(steps)):
            g = dh + d_out[:, t]
            if masks is not None:
                g = g.mul_(keep[:, t])
            for d in reversed(range(depth)):
                _, a, b_z, c_r, r, z = saved[d][t]
                d_r, d_z, d_n = d_gh[d, t].split(size, -1)
                an = torch.mul(g, a, out=d_an[d, t])
                torch.mul(g, b_z, out=d_z)
                torch.mul(an, c_r, out=d_r)
                torch.mul(an, r, out=d_n)
                w_t = weights_t[d]
                back = torch.bmm(d_gh[d, t].to(w_t.dtype), w_t)
                g = torch.addcmul(back.to(g.dtype), g, z)
            dh = g if masks is None else torch.addcmul(g, dh, drop[:, t])
        d_gi = d_gh[0].transpose(0, 1).clone()  # (D, T, B, 3H)
        d_gi[..., 2 * size :] = d_an[0].transpose(0, 1)
        d_weights, d_input_biases, d_hidden_biases = [], [], []
        for d in range(depth):
            dtype = weights[d].dtype
            states = torch.stack([s[0] for s in saved[d]], 1).flatten(1, 2)
            grads = d_gh[d].transpose(0, 1).reshape(dirs, steps * batch, 3 * size)
            d_hidden_biases.append(grads.sum(1, keepdim=True))
            if ctx.bucket:  # zero rows: T·B in a bucket too
                rows = bucket_size(steps * batch)
                states, grads = pad_dim(states, 1, rows), pad_dim(grads, 1, rows)
            # ∂U_d = Σ_t h_tᵀ ∂gh_t: one matmul over all T·B rows
            d_weights.append(torch.bmm(states.transpose(1, 2), grads.to(dtype)))
            if d > 0:
                d_bi = d_hidden_biases[-1].clone()
                d_bi[..., 2 * size :] = d_an[d].sum((0, 2)).unsqueeze(1)
                d_input_biases.append(d_bi)
        return (
            d_gi.to(ctx.gi_dtype),
            dh,
            None,
            None,
            None,
            *d_weights,
            *d_input_biases,
            *d_hidden_biases,
        )
