"""What one micro-batch minimises: label-smoothed cross-entropy, plus R-Drop's
symmetric KL and guided alignment's loss when they are on.

A free function of the module that trains, the batch and the weights, so the
trainer's step (accumulation, AMP, clipping) and the objective can be read apart.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from seq2seq.alignment.guided import guided_alignment_loss
from seq2seq.data.batching import Batch
from seq2seq.model.loss import symmetric_kl, token_loss


class Objective(NamedTuple):
    """Summed over the batch's target tokens: ``loss`` the translation loss (what is
    logged), ``objective`` what is minimised; ``guide`` and ``kl`` the guided
    alignment and R-Drop terms, or None when off."""

    loss: Tensor
    objective: Tensor
    guide: Tensor | None
    kl: Tensor | None


def batch_objective(
    model: torch.nn.Module,
    batch: Batch,
    sampling_ratio: float,
    label_smoothing: float,
    rdrop: float = 0.0,
    gold: Tensor | None = None,
    guided_weight: float = 0.0,
) -> Objective:
    """One micro-batch's ``Objective``; ``gold`` ``(B, T, S)`` the gold attention.

    R-Drop (``rdrop > 0``) runs the batch twice in one forward pass (the batch
    stacked on itself, other dropout masks per copy): the loss is the two copies'
    mean cross-entropy, the objective adds ``rdrop / 2`` times their symmetric KL."""
    src, lengths, mask, tgt_in, rows = (
        batch.src,
        batch.src_lengths,
        batch.src_mask,
        batch.tgt_in,
        batch.tgt_rows,  # logits for the non-pad targets only
    )
    twice = rdrop > 0
    if twice:
        src, lengths, mask, tgt_in = (
            torch.cat([x, x]) for x in (src, lengths, mask, tgt_in)
        )
        rows = torch.cat([rows, rows + batch.tgt_in.numel()])
    targets, eps = batch.flat_targets(), label_smoothing
    # Without R-Drop the model returns the loss (its output layer and the loss run
    # together, OutputLayer.loss); R-Drop's KL needs both copies' logits.
    asked = {} if twice else {"targets": targets, "smoothing": eps}
    out = model(
        src, lengths, mask, tgt_in, sampling_ratio=sampling_ratio, rows=rows, **asked
    )
    kl = None
    if twice:
        first, second = out.logits.chunk(2)
        loss = (token_loss(first, targets, eps) + token_loss(second, targets, eps)) / 2
        kl = symmetric_kl(first, second)
        objective = loss + rdrop / 2 * kl
    else:
        loss = objective = out.loss
    guide = None
    if gold is not None:  # logged losses stay the translation loss
        gold = torch.cat([gold, gold]) if twice else gold
        guide = guided_alignment_loss(out.attention, gold) / (2 if twice else 1)
        objective = objective + guided_weight * guide
    return Objective(loss, objective, guide, kl)
