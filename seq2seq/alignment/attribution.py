"""Attention versus attribution: which source tokens the output is *sensitive* to.

Attention weights say how the decoder mixed the source states; gradient × input says
how much the log-probability of each target token would move if a source token's
embedding were scaled: ``a_ts = |Σ_d ∂ log p(y_t) / ∂x_sd · x_sd|``, normalised per
target row. Neither is a causal explanation; where they disagree, the attention map
alone would mislead. Their agreement is summarised by a Spearman rank correlation.

A self-attention head has no output word of its own, so its weights are compared with
their *attention attribution* (Hao et al., 2021, "Self-Attention Attribution"): how
much the log-probability of the whole reference, ``F = Σ_t log p(y_t)``, owes to each
weight of the head, integrated along the path that scales the block's weights from 0
to what the model computed::

    Attr(A_h) = | A_h ⊙ ∫₀¹ ∂F(α A) / ∂A_h dα |      (a Riemann sum of ``steps`` points)

scaled so that each head's largest is 1 (Hao et al. draw it so). Not normalised per
row: a head's rows often put nearly all their weight on one key, where a row-normalised
attribution could only agree with it; scaled per head, the attribution also says which
queries' attention ``F`` depends on, which the weights (every row sums to 1) cannot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from seq2seq.alignment.extract import without_eos
from seq2seq.data.batching import collate
from seq2seq.decoding.translator import Translator
from seq2seq.errors import ConfigValueError
from seq2seq.model.seq2seq import Seq2Seq

ATTENTION_ATTRIBUTION = "attention attribution"


def grad_times_input(
    fn: Callable[[Tensor], Tensor], inputs: Tensor, normalize: bool = True
) -> Tensor:
    """Gradient × input of each output of ``fn`` with respect to each input row.

    Args:
        fn: maps inputs ``(S, D)`` to scores ``(T,)`` (log-probabilities).
        inputs: ``(S, D)`` the points (source embeddings) to explain.
        normalize: divide each row of the result by its sum (all-zero rows stay 0).

    Returns ``(T, S)``: ``|Σ_d ∂fn(x)_t / ∂x_sd · x_sd|``.
    """
    x = inputs.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        scores = fn(x)  # (T,)
        rows = []
        for t in range(scores.size(0)):
            (grad,) = torch.autograd.grad(scores[t], x, retain_graph=True)
            rows.append((grad * x.detach()).sum(dim=-1).abs())  # (S,)
    out = torch.stack(rows) if rows else x.new_zeros(0, x.size(0))  # (T, S)
    if normalize:
        total = out.sum(dim=-1, keepdim=True)
        out = torch.where(total > 0, out / total.clamp_min(1e-30), out)
    return out


def model_attribution(
    translator: Translator, src_ids: list[int], tgt_ids: list[int]
) -> Tensor:
    """Gradient × input attribution ``(T + 1, S + 1)`` of a teacher-forced pair.

    Rows follow the attention's rows (the target pieces, then end-of-sentence); columns
    its columns (the source pieces, then the source EOS). Dropout is off (eval mode);
    the gradients are taken in fp32, whatever the translator's precision.
    """
    model = translator.model
    if not isinstance(model, Seq2Seq):
        raise ConfigValueError(
            "attribution=true explains one model: give one checkpoint, not an ensemble"
        )
    model.eval()
    batch = collate([(0, list(src_ids), without_eos(tgt_ids))]).to(translator.device)
    embedding = model.encoder.embedding
    base = embedding(batch.src)[0].detach()  # (S, E)

    def log_probs(x: Tensor) -> Tensor:
        handle = embedding.register_forward_hook(lambda m, i, o: x.unsqueeze(0))
        try:
            out = model(batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in)
        finally:
            handle.remove()
        lp = torch.log_softmax(out.logits[0].float(), dim=-1)  # (T, V)
        return lp.gather(1, batch.tgt_out[0].unsqueeze(1)).squeeze(1)  # (T,)

    return grad_times_input(log_probs, base)


def self_attention_attribution(
    translator: Translator, src_ids: list[int], tgt_ids: list[int], steps: int = 20
) -> Tensor:
    """Each block's heads' attention attribution ``(layers, heads, S + 1, S + 1)`` of a
    teacher-forced pair (module docstring), each head's largest 1; the weights' layout
    (rows: the querying source piece, the source EOS last). Each block's ``steps``
    scaled copies run as one batch; dropout off, fp32."""
    model = translator.model
    if not isinstance(model, Seq2Seq):
        raise ConfigValueError(
            "attribution=true explains one model: give one checkpoint, not an ensemble"
        )
    blocks = [] if model.self_attention is None else list(model.self_attention.blocks)
    if not blocks:
        raise ConfigValueError("this model has no self-attention blocks to attribute")
    model.eval()
    one = collate([(0, list(src_ids), without_eos(tgt_ids))]).to(translator.device)
    with torch.no_grad():
        forced = model(
            one.src, one.src_lengths, one.src_mask, one.tgt_in, self_weights=True
        )
    maps = forced.self_attention  # (1, layers, heads, S, S), float32
    alphas = torch.arange(1, steps + 1, device=translator.device) / steps
    batch = collate([(i, list(src_ids), without_eos(tgt_ids)) for i in range(steps)])
    batch = batch.to(translator.device)
    out = []
    for layer, block in enumerate(blocks):
        fixed = maps[0, layer].float()  # (heads, S, S)
        scaled = (alphas[:, None, None, None] * fixed).requires_grad_(True)

        def hook(q, k, v, mask, scaled=scaled):
            return scaled.to(v.dtype) @ v, scaled

        block.weights_hook = hook
        try:
            with torch.enable_grad():
                logits = model(
                    batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in
                )
                lp = torch.log_softmax(logits.logits.float(), dim=-1)
                total = lp.gather(2, batch.tgt_out.unsqueeze(2)).sum()
                (grad,) = torch.autograd.grad(total, scaled)
        finally:
            block.weights_hook = None
        attr = (fixed * grad.mean(dim=0)).abs()  # the Riemann sum's mean over α
        top = attr.amax(dim=(-2, -1), keepdim=True)  # per head
        out.append(torch.where(top > 0, attr / top.clamp_min(1e-30), attr))
    return torch.stack(out)


def rank(values: np.ndarray) -> np.ndarray:
    """Ranks (1-based) of a 1-D array; ties get the mean of their ranks."""
    values = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(a, b) -> float:
    """Spearman rank correlation of two equally shaped arrays (flattened).

    NaN when either side is constant (its ranks have no spread).
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    ra, rb = rank(a), rank(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")
