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
    occlusion,
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
    knocked out (``forced.occlusion``), in nats, on the host. One forced pass of
    ``W + 1`` rows per sentence."""
    tr = translator
    tr.model.eval()
    out = []
    for src, tgt in zip(split.src_ids, split.tgt_ids, strict=True):
        groups = word_pieces(tr.tokenizer.src_pieces(list(src)))
        batch = collate([(0, list(src), list(tgt))]).to(tr.device)
        with autocast(tr.device, tr.amp_dtype):
            drops = occlusion(
                tr.model,
                batch.src,
                batch.src_lengths,
                batch.tgt_in,
                batch.tgt_out,
                groups,
            )
        out.append(spread_over_pieces(drops.float(), groups, len(src) + 1).cpu())
    return out
