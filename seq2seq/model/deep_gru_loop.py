"""A GRU layer's whole time loop as one autograd function, with a hand-written backward.

Under autograd each time step of ``DeepGRU`` records about a dozen nodes (a matmul,
the gates' splits, sigmoids, products, the mask), and its backward multiplies the
weight gradient of every step separately: T small ``(H × B) @ (B × 3H)`` products,
each summed into the weight's gradient. Marian and cuDNN instead step the backward
by hand and leave the weight gradient for one product over all steps. This module
does the same for ``DeepGRU`` without layer norm (deep transition, both directions
batched, padding masks):

Forward, for each step t and transition d (d = 0 takes the hoisted input gates
``gi_t = W x_t`` plus its input-side bias, d ≥ 1 only its input-side bias)::

    gi = gi_t + b^i_0 (d = 0) or b^i_d (d ≥ 1)
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
``∂b^h_d = Σ ∂gh``, ``∂b^i_d = Σ ∂gi``. It computes what autograd computes
(``tests/test_deep_gru_loop.py`` compares values and gradients in float64), in
fewer, larger kernels. Double backward is not supported (training needs none).

Both directions step together, in the layer's own batch-first layout: loop step t
reads and writes time t for the forward direction and time T − 1 − t for the
backward one, so nothing is flipped, stacked or concatenated around the loop (nor
the gradients after it). Under CPU bf16 autocast the weight gradient's T·B rows are
padded to ``bucket_size`` (``model/shape_buckets.py``: oneDNN builds a kernel per
shape); the batch arrives padded (``DeepGRU``).
The forward and the backward each call one plain function per time step
(``forward_step``, ``backward_step``); with ``fused`` (``trainer.compile=auto`` on a
CPU) both run through torch.compile, which fuses a step's element-wise work around its
matmuls (``docs/performance.md``, "Compiled recurrent steps").

Shapes: ``D`` directions, ``T`` steps, ``B`` batch, ``H`` hidden size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seq2seq.model.compiled import compiled
from seq2seq.model.shape_buckets import bucket_size, buckets_active


def gru_layer(
    gi: Tensor,
    h0: Tensor,
    mask: Tensor | None,
    weights: list[Tensor],
    input_biases: list[Tensor],
    hidden_biases: list[Tensor],
    fused: bool = False,
) -> tuple[Tensor, Tensor]:
    """A layer's recurrence over all steps, batch first: gi ``(B, T, D, 3H)`` (the
    input projection ``W x`` of each direction at each time, no bias: bf16 under
    autocast, as the matmul made it), h0 ``(D, B, H)``, mask ``(B, T, 1)`` bool (True:
    a real step) or None, and per transition d its recurrent weight ``(D, H, 3H)``
    (already transposed, in autocast's dtype), input-side bias ``(D, 1, 3H)`` and
    recurrent bias ``(D, 1, 3H)`` → outputs ``(B, T, D, H)`` (zeros at padding) and
    the final states ``(D, B, H)``, in float32 or wider. With D = 2 the second
    direction runs from the last time to the first."""
    depth = len(weights)
    params = (*weights, *input_biases, *hidden_biases)
    # the state in float32 (or wider) from the first step on, whatever gi's dtype
    h0 = h0.to(torch.promote_types(gi.dtype, torch.float32))
    bucket = buckets_active(gi.device)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (gi, h0, *params)):
        return GRURecurrence.apply(gi, h0, mask, depth, bucket, fused, *params)
    out, h, _, _ = _recurrence(gi, h0, mask, depth, params, False, fused)
    return out, h


def step_times(t: int, steps: int, dirs: int) -> tuple[int, ...]:
    """The time each direction is at in loop step ``t``: t, and T − 1 − t for the
    backward direction."""
    return (t, steps - 1 - t)[:dirs]


def _recurrence(
    gi: Tensor,
    h0: Tensor,
    mask: Tensor | None,
    depth: int,
    params: tuple[Tensor, ...],
    save: bool,
    fused: bool = False,
    pad_rows: int = 0,
) -> tuple[Tensor, Tensor, list[Tensor], list[list[tuple[Tensor, ...]]]]:
    """The forward loop → outputs, final states and, with ``save``, what the backward
    needs: per transition the states it started from, in the matmul's dtype, as the
    rows of ``∂U``'s matmul ``(D, T·B + pad_rows, H)`` (``step_rows``, in loop
    order), and per transition and loop step A, Bz, C, r, z. ``fused``: each time
    step through torch.compile (``step_fn``)."""
    # detached: the steps need no graph (the autograd function or no_grad around
    # them), and a compiled step would otherwise compile again for requires_grad
    gi, h0 = gi.detach(), h0.detach()
    params = tuple(p.detach() for p in params)
    weights = list(params[:depth])
    input_biases = list(params[depth : 2 * depth])
    # cast once, not at every step: the biases to the matmul's dtype, the masks to
    # the state's (a bool factor would be cast at each product)
    hidden_biases = [
        b.to(w.dtype) for b, w in zip(params[2 * depth :], weights, strict=True)
    ]
    batch, steps, dirs = gi.shape[:3]
    size = h0.size(-1)
    # per time, each direction's view of its input gates (B, 3H); per loop step the
    # directions' masks (D, B, 1), as bool and as a factor
    gi_at = [g.unbind(1) for g in gi.unbind(1)]
    real_at = keep_at = None
    if mask is not None:
        real_at = loop_masks(mask, dirs)
        keep_at = loop_masks(mask.to(h0.dtype), dirs)
    # each step writes its output and start states here: no stack of the steps after
    out = h0.new_empty(batch, steps, dirs, size)
    out_at = [o.unbind(1) for o in out.unbind(1)]
    starts = [step_rows(w, dirs, steps, batch, size, pad_rows) for w in weights if save]
    step = step_fn(forward_step, fused)
    h = h0
    saved: list[list[tuple[Tensor, ...]]] = [[] for _ in range(depth)]
    for t in range(steps):
        times = step_times(t, steps, dirs)
        h, products = step(
            [gi_at[s][k] for k, s in enumerate(times)],
            h,
            keep_at[t] if keep_at is not None else None,
            real_at[t] if real_at is not None else None,
            weights,
            input_biases,
            hidden_biases,
            [out_at[s][k] for k, s in enumerate(times)],
            [by_step[:, t] for _, by_step in starts] if save else None,
        )
        for d, step_products in enumerate(products):
            saved[d].append(step_products)
    return out, h, [rows for rows, _ in starts], saved


def step_rows(
    like: Tensor, dirs: int, steps: int, batch: int, width: int, pad_rows: int
) -> tuple[Tensor, Tensor]:
    """A ``(D, T·B + pad_rows, W)`` tensor of ``like``'s dtype for the steps to fill
    (one matmul's rows over all steps), its pad rows zeroed, and its first T·B rows as
    ``(D, T, B, W)``, whose ``[:, t]`` step t writes."""
    rows = like.new_empty(dirs, steps * batch + pad_rows, width)
    rows[:, steps * batch :].zero_()
    return rows, rows[:, : steps * batch].unflatten(1, (steps, batch))


def loop_masks(mask: Tensor, dirs: int) -> tuple[Tensor, ...]:
    """Per loop step t, the directions' masks at their times ``(D, B, 1)`` from mask
    ``(B, T, 1)``: one small tensor a step, so that no step gets the same tensor
    twice (the middle step of an odd T) or a view at offset 0 or 1, each of which
    torch.compile would compile a graph of its own for."""
    by_time = mask.transpose(0, 1)  # (T, B, 1)
    return torch.stack([by_time, by_time.flip(0)][:dirs], 1).unbind(0)


def forward_step(
    gi_t: list[Tensor],
    h: Tensor,
    keep_t: Tensor | None,
    real_t: Tensor | None,
    weights: list[Tensor],
    input_biases: list[Tensor],
    hidden_biases: list[Tensor],
    out_t: list[Tensor],
    starts_t: list[Tensor] | None,
) -> tuple[Tensor, list[tuple[Tensor, ...]]]:
    """One loop step, every transition: per direction its input gates ``(B, 3H)`` at
    that direction's time, h ``(D, B, H)`` and the step's masks as a factor and as
    bool ``(D, B, 1)`` (or None) → the carried state, with each direction's output
    (zeros at padding) written to its ``out_t``; with ``starts_t`` (to save for the
    backward) each transition's start state written there and its products
    returned. A plain function of tensors, so torch.compile can fuse a step's
    element-wise work around its matmuls (and the reads and writes of its views)."""
    gi_t = torch.stack(gi_t)  # (D, B, 3H)
    size = h.size(-1)
    new, saved = h, []
    for d, w in enumerate(weights):
        start = new.to(w.dtype)  # the matmul's operand, saved as is for ∂U
        # the gates in the state's dtype: one cast of gh (bf16 under autocast)
        # instead of one in each element-wise op that mixes it with fp32
        gh = torch.baddbmm(hidden_biases[d], start, w).to(new.dtype)
        gi_d = gi_t + input_biases[0] if d == 0 else input_biases[d]
        gi_rz, gi_n = gi_d.split((2 * size, size), -1)
        gh_rz, gh_n = gh.split((2 * size, size), -1)
        gates = torch.sigmoid(gi_rz + gh_rz)
        r, z = gates.chunk(2, -1)
        n = torch.tanh(torch.addcmul(gi_n, r, gh_n))
        h_minus_n = new - n
        if starts_t is not None:
            starts_t[d].copy_(start)
            slope_r, slope_z = (gates * (1 - gates)).chunk(2, -1)  # σ(1 − σ)
            a = (1 - n * n) * (1 - z)
            saved.append((a, h_minus_n * slope_z, slope_r * gh_n, r, z))
        new = torch.addcmul(n, z, h_minus_n)
    if keep_t is not None:
        new = new * keep_t
        h = torch.where(real_t, new, h)
    else:
        h = new
    for k, out in enumerate(out_t):
        out.copy_(new[k])
    return h, saved


def step_fn(fn: Callable, fused: bool) -> Callable:
    """``fn`` itself, or its torch.compile (``model/compiled.py``) when ``fused``."""
    return compiled(fn) if fused else fn


class GRURecurrence(torch.autograd.Function):
    """``gru_layer``'s autograd function (see the module docstring).

    The forward saves, per transition, the states it started from at every step (as
    the matmul read them: bf16 under autocast, half the memory), written by the steps
    into the rows of ``∂U``'s matmul, and per step the four products the backward
    multiplies by (``A = (1 − z)(1 − n²)``, ``Bz = (h − n) z(1 − z)``, ``C = gh_n r(1 −
    r)``, and r, z): the backward is then, a step, a few products, one matmul per
    transition and the biases' gradients summed (``backward_step``), each step
    writing ∂gi and ∂gh where the end of the loop reads them (no stack or concatenation
    of the steps: 1–3 % of a training step, ``docs/performance.md``)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        gi: Tensor,
        h0: Tensor,
        mask: Tensor | None,
        depth: int,
        bucket: bool,
        fused: bool,
        *params: Tensor,
    ) -> tuple[Tensor, Tensor]:
        # under CPU bf16 ∂U's matmul has a row count in a bucket: zero rows after
        rows = gi.size(0) * gi.size(1)
        pad_rows = bucket_size(rows) - rows if bucket else 0
        out, h, starts, saved = _recurrence(
            gi, h0, mask, depth, params, True, fused, pad_rows
        )
        ctx.depth, ctx.gi_dtype, ctx.has_mask = depth, gi.dtype, mask is not None
        ctx.pad_rows, ctx.fused = pad_rows, fused
        ctx.save_for_backward(
            mask if mask is not None else gi.new_empty(0),
            *params[:depth],
            *starts,
            *(x for transition in saved for step in transition for x in step),
        )
        return out, h

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any, d_out: Tensor, d_final: Tensor
    ) -> tuple[Tensor | None, ...]:
        depth = ctx.depth
        mask, *rest = ctx.saved_tensors
        weights, starts, rest = rest[:depth], rest[depth : 2 * depth], rest[2 * depth :]
        batch, steps, dirs, size = d_out.shape
        per_step = len(rest) // (depth * steps)
        saved = [
            [rest[(d * steps + t) * per_step :][:per_step] for t in range(steps)]
            for d in range(depth)
        ]
        # Uᵀ contiguous once, not transposed in every step's matmul
        weights_t = [w.transpose(1, 2).contiguous() for w in weights]
        keep_at = drop_at = None
        if ctx.has_mask:
            keep = mask.to(d_out.dtype)
            keep_at, drop_at = loop_masks(keep, dirs), loop_masks(1 - keep, dirs)
        # the biases' gradients, summed over the steps as they go
        d_hidden_biases = [d_out.new_zeros(dirs, 1, 3 * size) for _ in range(depth)]
        d_input_biases = [d_out.new_zeros(dirs, 1, 3 * size) for _ in range(depth)]
        step = step_fn(backward_step, ctx.fused)
        # each step writes its ∂gi and each transition's ∂gh here
        d_gi = d_out.new_empty(batch, steps, dirs, 3 * size, dtype=ctx.gi_dtype)
        d_gh = [
            step_rows(w, dirs, steps, batch, 3 * size, ctx.pad_rows) for w in weights
        ]
        d_out_at = [d.unbind(1) for d in d_out.unbind(1)]
        d_gi_at = [d.unbind(1) for d in d_gi.unbind(1)]
        dh = d_final
        for t in reversed(range(steps)):
            times = step_times(t, steps, dirs)
            dh, d_hidden_biases, d_input_biases = step(
                [d_out_at[s][k] for k, s in enumerate(times)],
                dh,
                keep_at[t] if keep_at is not None else None,
                drop_at[t] if drop_at is not None else None,
                [saved[d][t] for d in range(depth)],
                weights_t,
                d_hidden_biases,
                d_input_biases,
                [d_gi_at[s][k] for k, s in enumerate(times)],
                [by_step[:, t] for _, by_step in d_gh],
            )
        # ∂U_d = Σ_t h_tᵀ ∂gh_t: one matmul over all T·B rows (and the zero pad rows),
        # made as (∂U_d)ᵀ: U_d is the parameter ``(D, 3H, H)`` transposed, so its
        # gradient arrives at the parameter in the parameter's own layout, which
        # autograd keeps as it is instead of copying it into that layout
        d_weights = [
            torch.bmm(grads.transpose(1, 2), states).transpose(1, 2)
            for states, (grads, _) in zip(starts, d_gh, strict=True)
        ]
        return (
            d_gi,
            dh,
            None,
            None,
            None,
            None,
            *d_weights,
            *d_input_biases,
            *d_hidden_biases,
        )


def backward_step(
    d_out_t: list[Tensor],
    dh: Tensor,
    keep_t: Tensor | None,
    drop_t: Tensor | None,
    saved_t: list[tuple[Tensor, ...]],
    weights_t: list[Tensor],
    d_hidden_biases: list[Tensor],
    d_input_biases: list[Tensor],
    d_gi_t: list[Tensor],
    d_gh_t: list[Tensor],
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """One loop step of the backward, every transition, last to first: per direction
    the output's gradient ``(B, H)`` at that direction's time, the carried state's
    gradient dh ``(D, B, H)``, the step's masks as factors ``(D, B, 1)`` (or None), each
    transition's saved A, Bz, C, r, z, the transposed recurrent weights ``(D, 3H,
    H)`` and the biases' gradients so far → the carried state's gradient for the
    step before and the biases' gradients with this step's added; each direction's
    ∂gi ``(B, 3H)`` is written to its ``d_gi_t``, each transition's ∂gh (in the
    matmul's dtype) to ``d_gh_t``. A plain function of tensors, for torch.compile
    (``step_fn``)."""
    g = dh + torch.stack(d_out_t)
    if keep_t is not None:
        g = g * keep_t
    d_hidden_biases, d_input_biases = list(d_hidden_biases), list(d_input_biases)
    for d in reversed(range(len(weights_t))):
        a, b_z, c_r, r, z = saved_t[d]
        a_n = g * a
        a_r, a_z = a_n * c_r, g * b_z
        gh = torch.cat([a_r, a_z, a_n * r], -1)
        gh_low = gh.to(weights_t[d].dtype)
        d_gh_t[d].copy_(gh_low)
        d_hidden_biases[d] = d_hidden_biases[d] + gh.sum(1, keepdim=True)
        gi = torch.cat([a_r, a_z, a_n], -1)
        d_input_biases[d] = d_input_biases[d] + gi.sum(1, keepdim=True)
        if d == 0:  # in gi's dtype, converted in the step's kernel
            for k, d_gi in enumerate(d_gi_t):
                d_gi.copy_(gi[k])
        back = torch.bmm(gh_low, weights_t[d])
        g = back.to(g.dtype) + g * z
    if drop_t is not None:
        g = g + dh * drop_t
    return g, d_hidden_biases, d_input_biases
