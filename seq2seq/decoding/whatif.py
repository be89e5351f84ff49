"""What-ifs on a ``Translator``: forced passes under knock-outs, each step's
distribution, the change in a translation's log-probability, and occlusion.

The searches with a prefix or knock-outs are ``Translator.translate``/``nbest``/
``attention``'s own (``prefixes=``, ``knockouts=``); this module holds the forced
(teacher-forced) questions asked of a given translation, pair by pair in a split's
order, each batched as ``Translator.forced_attention`` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from seq2seq.data.batching import collate
from seq2seq.data.pieces import word_pieces
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.forced import (
    StepStats,
    occlusion_rows,
    spread_over_pieces,
    step_stats,
    target_log_probs,
)
from seq2seq.decoding.knockout import Knockout
from seq2seq.model.device import autocast

if TYPE_CHECKING:
    from seq2seq.decoding.translator import Translator


def _targets(split: EncodedSplit, k: int, device: torch.device) -> torch.Tensor:
    """Pair ``k``'s target pieces with EOS, as the forced pass scores them."""
    return collate([(0, [], list(split.tgt_ids[k]))]).tgt_out[0].to(device)


def step_distributions(
    translator: Translator,
    split: EncodedSplit,
    k: int = 5,
    knockouts: Sequence[Knockout | None] | None = None,
) -> list[StepStats]:
    """Per pair, each target step's probability of the piece written, entropy and
    ``k`` most probable pieces (``forced.step_stats``), on the host."""
    out = []
    for i, res in enumerate(translator.forced_passes(split, knockouts)):
        stats = step_stats(res.log_probs, _targets(split, i, res.log_probs.device), k)
        out.append(StepStats(*(x.cpu() for x in stats)))
    return out


def log_probabilities(
    translator: Translator,
    split: EncodedSplit,
    knockouts: Sequence[Knockout | None] | None = None,
) -> list[float]:
    """Per pair, the log-probability of its target with EOS (the summed pieces' log
    p), under ``knockouts``: a knock-out's change in a translation's
    log-probability is this with and without it."""
    out = []
    for i, res in enumerate(translator.forced_passes(split, knockouts)):
        targets = _targets(split, i, res.log_probs.device)
        out.append(float(target_log_probs(res.log_probs[None], targets[None]).sum()))
    return out


@torch.inference_mode()
def occlusion_maps(translator: Translator, split: EncodedSplit) -> list[torch.Tensor]:
    """Per pair, occlusion ``(T + 1, S + 1)`` laid over the source pieces like its
    attention (``forced.spread_over_pieces``; the source EOS column 0): each row the
    drop in the log-probability of the piece written when each source word is
    knocked out (``forced.occlusion``), in nats, on the host. A pair is encoded
    once and decoded in ``W + 1`` rows (``forced.occlusion_rows``); pairs of similar
    lengths share a pass, up to the translator's budget of decoder rows × padded
    target pieces (``batch_tokens``)."""
    tr = translator
    tr.model.eval()
    groups = [word_pieces(tr.tokenizer.src_pieces(list(s))) for s in split.src_ids]
    out: list[torch.Tensor | None] = [None] * len(split)
    for chunk in _occlusion_chunks(split, groups, tr.batch_tokens):
        batch = collate([(k, split.src_ids[k], split.tgt_ids[k]) for k in chunk])
        batch = batch.to(tr.device)
        with autocast(tr.device, tr.amp_dtype):
            drops = occlusion_rows(tr.model, batch, [groups[k] for k in chunk])
        for k, drop in zip(chunk, drops, strict=True):
            width = len(split.src_ids[k]) + 1
            out[k] = spread_over_pieces(drop.float(), groups[k], width).cpu()
    return out  # type: ignore[return-value]


def _occlusion_chunks(
    split: EncodedSplit, groups: Sequence[Sequence[Sequence[int]]], budget: int
) -> list[list[int]]:
    """The pairs in groups of similar lengths (sorted by target, then source
    length) whose rows times their longest target stay within ``budget`` (a pair
    over it alone)."""
    order = sorted(
        range(len(split)), key=lambda k: (len(split.tgt_ids[k]), len(split.src_ids[k]))
    )
    chunks: list[list[int]] = []
    rows = longest = 0
    for k in order:
        n, t = len(groups[k]) + 1, len(split.tgt_ids[k]) + 1
        if chunks and (rows + n) * max(longest, t) <= budget:
            chunks[-1].append(k)
            rows, longest = rows + n, max(longest, t)
        else:
            chunks.append([k])
            rows, longest = n, t
    return chunks
