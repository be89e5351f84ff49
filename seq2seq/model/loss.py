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
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seq2seq.data.tokenizer import PAD_ID

BLOCK_BYTES = 2**21  # float32 bytes of one block of rows: 2 MiB stays in L2/L3


def block_rows(rows: int, vocab: int, device: torch.device) -> int:
    """Rows per block: cache-sized on CPU; on an accelerator one block (all rows),
    where memory bandwidth is high and every block would cost kernel launches."""
    if device.type != "cpu":
        return max(1, rows)
    return max(1, BLOCK_BYTES // (4 * vocab))


class _TokenCrossEntropy(torch.autograd.Function):
    """The gradient is computed in the forward pass, in the same blocks (one ``exp``
    per logit instead of two), and kept in the logits' dtype; backward only scales it
    by the incoming gradient."""

    @staticmethod
    def forward(
        ctx, logits: Tensor, targets: Tensor, smoothing: float, with_grad: bool
    ) -> Tensor:
        rows, vocab = logits.shape
        step = block_rows(rows, vocab, logits.device)
        keep = targets != PAD_ID
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        mean = torch.empty_like(lse) if smoothing else None
        grad = torch.empty_like(logits) if with_grad else None
        for start in range(0, rows, step):
            end = start + step
            z = logits[start:end].float()  # a view of float32 logits: not modified
            if mean is not None:
                mean[start:end] = z.mean(dim=-1)
            top = z.amax(dim=-1, keepdim=True)
            p = torch.sub(z, top).exp_()  # (block, V) unnormalised probabilities
            total = p.sum(dim=-1, keepdim=True)
            lse[start:end] = (top + total.log()).squeeze(1)
            if grad is not None:  # softmax - (1 - eps) onehot - eps / V, 0 for PAD
                p.mul_(keep[start:end].unsqueeze(1) / total)
                if smoothing:
                    p.sub_(keep[start:end].unsqueeze(1) * (smoothing / vocab))
                p.scatter_add_(
                    1,
                    targets[start:end].unsqueeze(1),
                    keep[start:end].unsqueeze(1) * (smoothing - 1.0),
                )
                grad[start:end] = p
        picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1).float()
        loss = (1.0 - smoothing) * (lse - picked)
        if mean is not None:
            loss = loss + smoothing * (lse - mean)
        ctx.save_for_backward(grad)
        return (loss * keep).sum()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        (grad,) = ctx.saved_tensors
        if grad is None:
            raise RuntimeError("token_loss was computed without gradient tracking")
        return grad * grad_out.to(grad.dtype), None, None, None


def token_loss(logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
    """Summed cross-entropy over non-pad targets (float32); logits ``(B, T, V)`` in
    any float dtype, targets ``(B, T)``; ``smoothing`` is the label-smoothing ε."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")
    flat = logits.reshape(-1, logits.size(-1))
    with_grad = torch.is_grad_enabled() and logits.requires_grad
    return _TokenCrossEntropy.apply(
        flat, targets.reshape(-1), float(smoothing), with_grad
    )


def symmetric_kl(a: Tensor, b: Tensor) -> Tensor:
    """``½ [KL(P_a ‖ P_b) + KL(P_b ‖ P_a)]`` summed over the rows of logits ``(N, V)``
    (softmax over the last axis, in float32): R-Drop's consistency term between two
    dropout passes (Liang et al., 2021). ``KL(a‖b) + KL(b‖a) = Σ (p_a - p_b)(log p_a -
    log p_b)``, so one product serves both directions."""
    log_a = torch.log_softmax(a.float(), dim=-1)
    log_b = torch.log_softmax(b.float(), dim=-1)
    return 0.5 * ((log_a.exp() - log_b.exp()) * (log_a - log_b)).sum()
