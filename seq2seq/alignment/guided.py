"""Guided alignment: the attention learns the gold word alignment as it translates.

Chen et al. (2016), "Guided Alignment Training for Topic-Aware Neural Machine
Translation": the training loss gets a second term, the cross-entropy between the
attention row of each target piece and the gold alignment of its word, spread evenly
over the pieces of the linked source words. Used when the training split carries
links: the phrasebook's gold, or a file (``data.alignments.train``) of another
aligner's links or of ``seq2seq-align``'s own. Unsupervised attention runs a word
ahead in reordered phrases (docs/results.md, AER), guided attention aligns.

Row ``t`` of the gold matches the attention row that *predicts* target piece ``t``
(the ``argmax`` readout of ``error.py``). Target words without links, the
end-of-sentence step and pairs whose pieces do not regroup into the gold's words get
no gold row: their attention stays free.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from seq2seq.alignment.links import parse_pharaoh
from seq2seq.alignment.words import regroup
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# (target piece rows, source piece columns, weights): one sparse gold matrix per pair.
SparseGold = tuple[np.ndarray, np.ndarray, np.ndarray]


def pair_gold(
    src_words: list[list[int]], tgt_words: list[list[int]], links: str
) -> SparseGold:
    """The gold attention of one pair, sparse; each aligned piece row sums to 1.

    ``links`` is Pharaoh (``i-j`` sure, ``i?j`` possible); both kinds count, since the
    readout is judged against sure and possible links alike.
    """
    _, possible = parse_pharaoh(links)
    sources: dict[int, set[int]] = {}
    for i, j in possible:
        if i >= len(src_words) or j >= len(tgt_words):
            raise ValueError(
                f"link {i}-{j} in {links!r} is outside a pair of {len(src_words)} "
                f"source and {len(tgt_words)} target words"
            )
        sources.setdefault(j, set()).add(i)
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []
    for j, words in sorted(sources.items()):
        columns = [s for i in sorted(words) for s in src_words[i]]
        for t in tgt_words[j]:
            rows += [t] * len(columns)
            cols += columns
            weights += [1.0 / len(columns)] * len(columns)
    return (
        np.asarray(rows, dtype=np.int64),
        np.asarray(cols, dtype=np.int64),
        np.asarray(weights, dtype=np.float32),
    )


class GoldAttention:
    """Piece-level gold attention of every pair of a split, batched on demand."""

    def __init__(self, split: EncodedSplit, tokenizer: Tokenizer) -> None:
        if split.alignment is None:
            raise ValueError(
                "trainer.guided_alignment > 0 needs word alignments of the "
                "training split (the phrasebook's gold, or a Pharaoh file: "
                "data.alignments.train=FILE); this corpus has none. Set "
                "trainer.guided_alignment=0, or give the file."
            )
        self.pairs: list[SparseGold | None] = []
        skipped = 0
        for k, links in enumerate(split.alignment):
            src = regroup(
                tokenizer.src_pieces(list(split.src_ids[k])), split.src_text[k]
            )
            tgt = regroup(
                tokenizer.tgt_pieces(list(split.tgt_ids[k])), split.tgt_text[k]
            )
            if src is None or tgt is None:
                self.pairs.append(None)
                skipped += 1
                continue
            try:
                self.pairs.append(pair_gold(src, tgt, links))
            except ValueError as err:
                raise ValueError(f"training pair {k}: {err}") from None
        if skipped:
            log.warning(
                "guided alignment: %d of %d training pairs have pieces that do not "
                "regroup into the gold's words; their attention is not guided",
                skipped,
                len(self.pairs),
            )

    def batch(self, ids: Sequence[int], n_tgt: int, n_src: int) -> Tensor:
        """Dense gold ``(B, T, S)`` for the pairs ``ids`` of a padded batch."""
        gold = torch.zeros(len(ids), n_tgt, n_src)
        for row, index in enumerate(ids):
            pair = self.pairs[index]
            if pair is not None and pair[0].size:
                t, s, w = (torch.from_numpy(a) for a in pair)
                gold[row, t, s] = w
        return gold


class SampledGoldAttention:
    """Gold attention that follows the pieces of the split being batched.

    Subword sampling (``data/sampling.py``) cuts the training split into new pieces
    every epoch, while the gold links are between words: the piece-level gold is
    rebuilt from ``current()`` whenever it is a new split (once per epoch, about 2 s
    for the 20,000 phrasebook pairs on one core). ``current()`` is checked now, so a
    corpus without links fails at trainer start.
    """

    def __init__(
        self, current: Callable[[], EncodedSplit], tokenizer: Tokenizer
    ) -> None:
        self.current, self.tokenizer = current, tokenizer
        self.split = current()
        self.gold = GoldAttention(self.split, tokenizer)

    def batch(self, ids: Sequence[int], n_tgt: int, n_src: int) -> Tensor:
        """Dense gold ``(B, T, S)`` of the pairs ``ids`` in their current pieces."""
        split = self.current()
        if split is not self.split:
            self.split, self.gold = split, GoldAttention(split, self.tokenizer)
        return self.gold.batch(ids, n_tgt, n_src)


def guided_alignment_loss(attention: Tensor, gold: Tensor) -> Tensor:
    """Summed cross-entropy ``-Σ gold · log attention`` over the gold's rows.

    attention ``(B, T, S)`` (probabilities), gold ``(B, T, S)`` with rows summing to 1
    or 0. Summed, not averaged, so it is normalised by the same token count as the
    translation loss.
    """
    log_att = attention.float().clamp_min(1e-9).log()
    return -(gold * log_att).sum()
