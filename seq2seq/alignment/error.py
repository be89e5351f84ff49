"""Does the attention align? AER of attention read out on force-decoded references.

Gold word alignments (Pharaoh ``i-j`` sure / ``i?j`` possible over whitespace words)
are compared with hard links read from the attention the model computes while it is
teacher-forced through the *reference* (never its own hypothesis: gold indices refer to
the reference's words). Two readouts (see ``words.word_matrix``):
``argmax`` takes the step that predicts the word; ``shifted`` the step where the word is
the decoder's input. End-of-sentence rows and columns never become links.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from seq2seq.alignment.links import Link, aer, parse_pharaoh
from seq2seq.alignment.words import argmax_links, pair_pieces, word_matrix
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.translator import ForcedAttention, Translator

log = logging.getLogger(__name__)


@dataclass
class AlignmentScores:
    """Corpus AER (fractions in [0, 1]) of the two readouts."""

    aer: float
    aer_shifted: float
    n_sentences: int
    skipped: int = 0  # pairs whose pieces did not regroup into the gold's words

    def summary(self) -> str:
        line = (
            f"AER {100 * self.aer:.1f}% (argmax) {100 * self.aer_shifted:.1f}% "
            f"(shifted) on references (n={self.n_sentences}"
        )
        return line + (f", {self.skipped} skipped)" if self.skipped else ")")


class Readouts(NamedTuple):
    """One pair's word attention ``(target words, source words)`` at the predicting
    step and one step later, and the hard links each row's argmax reads from them."""

    argmax: set[Link]
    shifted: set[Link]
    matrix: np.ndarray
    shifted_matrix: np.ndarray


def word_readouts(
    translator: Translator,
    split: EncodedSplit,
    forced: list[ForcedAttention] | None = None,
) -> list[Readouts | None]:
    """Per pair of ``split``, both readouts of the attention forced through its
    targets (``forced``: ``translator.forced_attention(split)`` when the caller has
    it already); None for a pair whose pieces do not regroup into as many words as
    its texts' whitespace tokens (an ``<unk>`` inside a word, say)."""
    forced = translator.forced_attention(split) if forced is None else forced
    matrices = [att.weights for att in forced]
    tokenizer = translator.tokenizer
    out: list[Readouts | None] = []
    for k, w in enumerate(matrices):
        pieces = pair_pieces(tokenizer, split, k)
        if pieces is None:
            out.append(None)
            continue
        src, tgt = pieces
        now, later = word_matrix(w, src, tgt), word_matrix(w, src, tgt, shifted=True)
        out.append(Readouts(argmax_links(now), argmax_links(later), now, later))
    return out


def alignment_scores(
    translator: Translator,
    split: EncodedSplit,
    forced: list[ForcedAttention] | None = None,
) -> AlignmentScores | None:
    """AER of both readouts against ``split.alignment``; None when there is no gold.
    ``forced``: the split's forced attention, when the caller has it already.

    Pairs whose pieces do not regroup into as many words as the gold's whitespace
    tokens (an ``<unk>`` inside a word, say) are skipped and counted.
    """
    if split.alignment is None:
        return None
    predicted: list[set[Link]] = []
    shifted: list[set[Link]] = []
    sure: list[set[Link]] = []
    possible: list[set[Link]] = []
    readouts = word_readouts(translator, split, forced)
    for k, links in enumerate(readouts):
        if links is None:
            continue
        predicted.append(links.argmax)
        shifted.append(links.shifted)
        s, p = parse_pharaoh(split.alignment[k])
        sure.append(s)
        possible.append(p)
    skipped = len(readouts) - len(predicted)
    if skipped:
        log.warning(
            "AER: skipped %d pairs whose pieces are not the gold's words", skipped
        )
    return AlignmentScores(
        aer=aer(predicted, sure, possible),
        aer_shifted=aer(shifted, sure, possible),
        n_sentences=len(predicted),
        skipped=skipped,
    )
