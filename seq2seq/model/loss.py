"""The training loss: summed, label-smoothed cross-entropy over non-pad target tokens.

``F.cross_entropy`` on the ``(N, V)`` logits of a batch (N ≈ 1,000 target tokens,
V = 8,000) makes several full passes over ~35 MB of float32: the cast of bf16 logits,
the log-softmax it keeps for the backward pass, a zero-filled gradient for the NLL,
the log-softmax backward and the cast back. That is more than the CPU's caches hold,
and it was about 12 % of a bf16 training step (5 % in fp32). ``token_loss`` computes the
same loss and its gradient together, in blocks of rows that stay in cache (on CPU;
one block on an accelerator), and keeps only the gradient, in the logits' dtype:

    loss_i = (1 - ε) (lse_i - z_{i,y_i}) + ε (lse_i - mean_v z_{i,v})
    ∂loss_i / ∂z_i = softmax(z_i) - (1 - ε) onehot(y_i) - ε / V

(the definition of ``F.cross_entropy(..., label_smoothing=ε)``; rows whose target is
PAD count zero).

At a large vocabulary the logits themselves are the problem: 4,096 targets × 32,000
pieces are 0.5 GB in float32, 1 GB with their gradient. ``linear_token_loss`` runs the
output projection and the loss together in chunks of rows, making each chunk's
gradients (features, weight, bias) in the forward pass, so only one chunk's logits
exist at a time (Liger-Kernel's "fused linear cross-entropy", in plain torch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from seq2seq.data.tokenizer import PAD_ID

# MB of float32 logits above which the output layer and the loss run fused, in
# chunks of this size (at most CPU_CHUNK_BYTES on CPU; ``OutputLayer.loss``);
# trainer.loss_chunk_mb sets it
DEFAULT_LOSS_CHUNK_MB = 128
BLOCK_BYTES = 2**21  # float32 bytes of one block of rows: 2 MiB stays in L2/L3
# On CPU, fused chunks of at most this many float32 bytes of logits: 262 rows at 32k
# pieces, still large matmuls there (16 MB chunks: the output layer and loss 14 %
# slower, scripts/benchmarks/bench_loss_chunks.py), and host memory is what the
# fusing is for
CPU_CHUNK_BYTES = 32 * 2**20


def block_rows(rows: int, vocab: int, device: torch.device) -> int:
    """Rows per block: cache-sized on CPU; on an accelerator one block (all rows),
    where memory bandwidth is high and every block would cost kernel launches."""
    if device.type != "cpu":
        return max(1, rows)
    return max(1, BLOCK_BYTES // (4 * vocab))


def fused_chunk_rows(vocab: int, limit_bytes: int, device: torch.device) -> int:
    """Rows per chunk of the fused output layer + loss: ``limit_bytes`` of float32
    logits (on CPU at most ``CPU_CHUNK_BYTES``); on an accelerator large chunks keep
    the matmuls efficient and the kernel launches few."""
    if device.type == "cpu":
        limit_bytes = min(limit_bytes, CPU_CHUNK_BYTES)
    return max(1, limit_bytes // (4 * vocab))


def _blocked_loss(
    z: Tensor, targets: Tensor, keep: Tensor, smoothing: float, grad: Tensor | None
) -> Tensor:
    """Per-row loss (float32 or wider; 0 for PAD) of logits ``z`` ``(N, V)``, in
    cache-sized blocks of rows; with ``grad`` ``(N, V)``, the gradient ``∂loss/∂z`` is
    written there. ``grad`` may be ``z``: each block is read before it is written."""
    rows, vocab = z.shape
    step = block_rows(rows, vocab, z.device)
    exact = torch.promote_types(z.dtype, torch.float32)  # float64 stays float64
    lse = torch.empty(rows, dtype=exact, device=z.device)
    mean = torch.empty_like(lse) if smoothing else None
    picked = z.gather(1, targets.unsqueeze(1)).squeeze(1).to(exact)
    for start in range(0, rows, step):
        end = start + step
        block = z[start:end].to(exact)  # a view of float32 logits: not modified
        if mean is not None:
            mean[start:end] = block.mean(dim=-1)
        top = block.amax(dim=-1, keepdim=True)
        p = torch.sub(block, top).exp_()  # (block, V) unnormalised probabilities
        total = p.sum(dim=-1, keepdim=True)
        lse[start:end] = (top + total.log()).squeeze(1)
        if grad is not None:  # softmax - (1 - eps) onehot - eps / V, 0 for PAD
            p.mul_(keep[start:end].unsqueeze(1) / total)
            if smoothing:
                p.sub_(keep[start:end].unsqueeze(1) * (smoothing / vocab))
            p.scatter_add_(
                1,
                targets[start:end].unsqueeze(1),
                (keep[start:end].unsqueeze(1) * (smoothing - 1.0)).to(p.dtype),
            )
            grad[start:end] = p
    loss = (1.0 - smoothing) * (lse - picked)
    if mean is not None:
        loss = loss + smoothing * (lse - mean)
    return loss * keep


class _TokenCrossEntropy(torch.autograd.Function):
    """The gradient is computed in the forward pass, in the same blocks (one ``exp``
    per logit instead of two), and kept in the logits' dtype; backward only scales it
    by the incoming gradient, in place."""

    @staticmethod
    def forward(
        ctx, logits: Tensor, targets: Tensor, smoothing: float, with_grad: bool
    ) -> Tensor:
        keep = targets != PAD_ID
        grad = torch.empty_like(logits) if with_grad else None
        loss = _blocked_loss(logits, targets, keep, smoothing, grad).sum()
        ctx.saved_grad = grad
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        # Scaled in place (the (N, V) gradient is the largest tensor of a step), so
        # it is handed out once: a second backward through this graph must fail.
        grad = ctx.saved_grad
        if grad is None:
            raise RuntimeError(
                "token_loss's backward ran twice on one graph (retain_graph), "
                "or the loss was computed without gradient tracking"
            )
        ctx.saved_grad = None
        return grad.mul_(grad_out.to(grad.dtype)), None, None, None


class _LinearTokenCrossEntropy(torch.autograd.Function):
    """The output layer and the loss together, in chunks of rows: each chunk's logits
    are made, turned into their gradient in place, and multiplied back into the
    gradients of the features, weight and bias before the next chunk; the full
    ``(N, V)`` logits never exist. The matmuls are those of the unfused path (one
    forward, two backward), so it costs no extra FLOPs."""

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        targets: Tensor,
        smoothing: float,
        chunk: int,
        with_grad: bool,
    ) -> Tensor:
        keep = targets != PAD_ID
        exact = torch.promote_types(x.dtype, torch.float32)
        loss = torch.zeros((), dtype=exact, device=x.device)
        if with_grad:
            grad_x = torch.empty_like(x)
            grad_w = torch.zeros_like(weight, dtype=torch.float32)
            grad_b = (
                None if bias is None else torch.zeros_like(bias, dtype=torch.float32)
            )
        # One buffer for every chunk's float32 logits: a fresh chunk each time is
        # freed between tensors the step keeps, and the heap cannot reuse the hole
        plain = x.dtype == weight.dtype == torch.float32
        buffer = None
        if plain and not torch.is_autocast_enabled(x.device.type):
            buffer = x.new_empty(min(chunk, x.size(0)), weight.size(0))
        for start in range(0, x.size(0), chunk):
            part = slice(start, start + chunk)
            if buffer is None:  # autocast casts as in the unfused path
                z = F.linear(x[part], weight, bias)
            else:
                z = buffer[: x[part].size(0)]
                if bias is None:
                    torch.mm(x[part], weight.t(), out=z)
                else:
                    torch.addmm(bias, x[part], weight.t(), out=z)
            g = z if with_grad else None  # the logits become their gradient in place
            loss += _blocked_loss(z, targets[part], keep[part], smoothing, g).sum()
            if g is not None:
                grad_x[part] = g @ weight.to(g.dtype)
                if g.dtype == grad_w.dtype:  # no (V, F) temporary to fragment the heap
                    grad_w.addmm_(g.t(), x[part])
                else:
                    grad_w += (g.t() @ x[part].to(g.dtype)).float()
                if grad_b is not None:
                    grad_b += g.sum(dim=0, dtype=torch.float32)
        ctx.saved_grads = None
        if with_grad:  # (N, F) and (V, F): small next to the logits, kept as they are
            ctx.saved_grads = (
                grad_x,
                grad_w.to(weight.dtype),
                None if grad_b is None else grad_b.to(bias.dtype),
            )
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        # Scaled in place, as token_loss's gradient: a copy of the (V, F) weight
        # gradient would come on top of every activation the step still holds.
        grads = ctx.saved_grads
        if grads is None:
            raise RuntimeError(
                "linear_token_loss's backward ran twice on one graph (retain_graph), "
                "or the loss was computed without gradient tracking"
            )
        ctx.saved_grads = None
        scaled = [None if g is None else g.mul_(grad_out.to(g.dtype)) for g in grads]
        return *scaled, None, None, None, None


def token_loss(logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
    """Summed cross-entropy over non-pad targets (float32); logits ``(B, T, V)`` in
    any float dtype, targets ``(B, T)``; ``smoothing`` is the label-smoothing ε."""
    _check_smoothing(smoothing)
    flat = logits.reshape(-1, logits.size(-1))
    with_grad = torch.is_grad_enabled() and logits.requires_grad
    return _TokenCrossEntropy.apply(
        flat, targets.reshape(-1), float(smoothing), with_grad
    )


def linear_token_loss(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    targets: Tensor,
    smoothing: float = 0.0,
    chunk: int = 1024,
) -> Tensor:
    """``token_loss(F.linear(x, weight, bias), targets, smoothing)`` for features
    ``x`` ``(N, F)``, computed ``chunk`` rows at a time: the memory of the logits and
    of their gradient is ``chunk × V``, not ``N × V`` (at 32k pieces and 4,096
    targets, 1 GB at float32 in the unfused path)."""
    _check_smoothing(smoothing)
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1 row, got {chunk}")
    with_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight, bias)
    )
    return _LinearTokenCrossEntropy.apply(
        x, weight, bias, targets.reshape(-1), float(smoothing), chunk, with_grad
    )


def _check_smoothing(smoothing: float) -> None:
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")


def symmetric_kl(a: Tensor, b: Tensor) -> Tensor:
    """``½ [KL(P_a ‖ P_b) + KL(P_b ‖ P_a)]`` summed over the rows of logits ``(N, V)``
    (softmax over the last axis, in float32): R-Drop's consistency term between two
    dropout passes (Liang et al., 2021). ``KL(a‖b) + KL(b‖a) = Σ (p_a - p_b)(log p_a -
    log p_b)``, so one product serves both directions."""
    log_a = torch.log_softmax(a.float(), dim=-1)
    log_b = torch.log_softmax(b.float(), dim=-1)
    return 0.5 * ((log_a.exp() - log_b.exp()) * (log_a - log_b)).sum()
