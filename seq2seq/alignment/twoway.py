"""Word links of a pair read by two models, one trained each way, and their AER.

The forward model (source→target) is forced through each pair as it is; the reverse
model (target→source, on the same corpus) is forced through the same pair with its
sides swapped, encoded with its own tokenizer. Each model's pieces are regrouped into
whitespace words (``words.regroup``), so both read the same word indices; the reverse
links (and word attention) are transposed into the forward's order and the two are
combined by a ``symmetrize`` rule, or by the geometric mean of the attention. A pair
that either model cannot regroup into its texts' words is left out of both, and
counted.

A ``Readout`` may first mix each direction's word attention with an IBM Model 1
lexicon trained on the corpus's train split (``lexicon.py``), before links are read
for any rule, and sets the thresholds of ``geometric``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from seq2seq.alignment.error import word_readouts
from seq2seq.alignment.lexicon import Lexicon, train_lexicon, weigh
from seq2seq.alignment.links import Link, aer, parse_pharaoh
from seq2seq.alignment.symmetrize import geometric, symmetrize, transpose
from seq2seq.alignment.words import argmax_links
from seq2seq.config import Symmetrize
from seq2seq.data.corpus import CorpusError, read_corpus
from seq2seq.data.splits import EncodedSplit, encode_texts
from seq2seq.decoding.translator import ForcedAttention, Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readout:
    """How both directions' word attention becomes links (``config.TwoWayReadout``):
    ``lexicon`` the share of the lexicons (``forward``: ``t(target | source)``,
    ``reverse``: ``t(source | target)``) mixed into each direction's attention,
    ``floor`` and ``add`` the thresholds of ``symmetrize.geometric``. The default
    reads the attention alone, with the plain geometric rule."""

    lexicon: float = 0.0
    forward: Lexicon | None = None
    reverse: Lexicon | None = None
    floor: float = 0.0
    add: float | None = None

    def describe(self) -> str:
        """``lexicon 0.4, floor 0.2, add 0.3``: the settings a summary names."""
        add = "none" if self.add is None else f"{self.add:g}"
        return f"lexicon {self.lexicon:g}, floor {self.floor:g}, add {add}"


def readout_for(settings: Any, data_cfg: Any) -> Readout:
    """The ``Readout`` that ``settings`` (``config.TwoWayReadout``) asks for, its
    lexicons trained on the train split of the corpus ``data_cfg`` describes.

    Raises:
        CorpusError: a lexicon is asked for and the corpus has no train split.
    """
    weight = float(settings.lexicon)
    forward = reverse = None
    if weight > 0:
        splits = read_corpus(data_cfg, links_for=()).splits
        if "train" not in splits:
            raise CorpusError(
                f"two_way.lexicon={weight:g} trains its lexicon on the corpus's train "
                f"split, and {data_cfg.name} has only {', '.join(splits)}; point "
                "data.* at the training corpus or set two_way.lexicon=0"
            )
        src, tgt = splits["train"]["src"], splits["train"]["tgt"]
        forward = train_lexicon(src, tgt, settings.lexicon_iterations)
        reverse = train_lexicon(tgt, src, settings.lexicon_iterations)
    return Readout(weight, forward, reverse, float(settings.floor), settings.add)


class TwoWay(NamedTuple):
    """One pair read both ways, all in the forward model's orientation: links as
    ``(source, target)`` word indices, attention as ``(target words, source words)``."""

    forward: set[Link]
    reverse: set[Link]  # the reverse model's links, transposed
    forward_attention: np.ndarray
    reverse_attention: np.ndarray  # the reverse model's word attention, transposed

    def combined(
        self, rule: Symmetrize | str, readout: Readout = Readout()
    ) -> set[Link]:
        """The pair's links under ``rule``: a link rule over the two link sets, or
        ``geometric`` over the two attention matrices (with ``readout``'s
        thresholds)."""
        if Symmetrize(rule) == Symmetrize.geometric:
            return geometric(
                self.forward_attention,
                self.reverse_attention,
                readout.floor,
                readout.add,
            )
        return symmetrize(self.forward, self.reverse, rule)


def swapped(split: EncodedSplit, translator: Translator) -> EncodedSplit:
    """The pairs of ``split`` the other way (target text as the source), encoded with
    ``translator``'s tokenizer; no gold."""
    return encode_texts(translator.tokenizer, split.tgt_text, split.src_text)


def two_way_links(
    forward: Translator,
    reverse: Translator,
    split: EncodedSplit,
    shifted: bool = False,
    forced: list[ForcedAttention] | None = None,
    readout: Readout = Readout(),
) -> list[TwoWay | None]:
    """Per pair of ``split`` (its ``tgt_ids`` the forward model's targets, its texts
    both sides' words), both models' links and word attention (``TwoWay``); None
    when either model's pieces do not regroup into the texts' words. ``shifted``:
    both read one step later. ``forced``: the forward model's forced attention on
    ``split``, when the caller has it. With ``readout.lexicon`` each direction's
    attention is mixed with its lexicon first, and its links are that mix's
    argmax."""
    ahead = word_readouts(forward, split, forced)
    back = word_readouts(reverse, swapped(split, reverse))
    out: list[TwoWay | None] = []
    for k, (there, home) in enumerate(zip(ahead, back, strict=True)):
        if there is None or home is None:
            out.append(None)
            continue
        if shifted:
            fwd, rev = there.shifted_matrix, home.shifted_matrix
        else:
            fwd, rev = there.matrix, home.matrix
        if readout.lexicon > 0:
            src, tgt = split.src_text[k].split(), split.tgt_text[k].split()
            fwd = weigh(fwd, readout.forward.posterior(src, tgt), readout.lexicon)
            rev = weigh(rev, readout.reverse.posterior(tgt, src), readout.lexicon)
        out.append(TwoWay(argmax_links(fwd), transpose(argmax_links(rev)), fwd, rev.T))
    return out


@dataclass
class SymmetrizedScores:
    """Corpus AER (fractions in [0, 1]) of each direction alone and of each way
    (``config.Symmetrize``) of combining them, on the pairs both directions read."""

    forward: float
    reverse: float
    rules: dict[str, float]
    n_sentences: int
    skipped: int = 0  # pairs that either model's pieces did not regroup
    forward_pair: str = "forward"  # e.g. en->fr
    reverse_pair: str = "reverse"
    readout: str = ""  # Readout.describe()

    def summary(self) -> str:
        parts = [
            f"{self.forward_pair} {100 * self.forward:.1f}%",
            f"{self.reverse_pair} {100 * self.reverse:.1f}%",
            *(f"{rule} {100 * value:.1f}%" for rule, value in self.rules.items()),
        ]
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        readout = f"; {self.readout}" if self.readout else ""
        return (
            f"AER both directions (argmax{readout}) on references "
            f"(n={self.n_sentences}{skipped}): " + " | ".join(parts)
        )


def symmetrized_scores(
    forward: Translator,
    reverse: Translator,
    split: EncodedSplit,
    forced: list[ForcedAttention] | None = None,
    readout: Readout = Readout(),
) -> SymmetrizedScores | None:
    """AER against ``split.alignment`` (the forward direction's gold) of the forward
    links, the transposed reverse links, and each symmetrization of the two, all
    read through ``readout``; None when there is no gold. ``forced`` as in
    ``two_way_links``."""
    if split.alignment is None:
        return None
    links = two_way_links(forward, reverse, split, forced=forced, readout=readout)
    kept = [k for k, pair in enumerate(links) if pair is not None]
    gold = [parse_pharaoh(split.alignment[k]) for k in kept]
    sure, possible = [s for s, _ in gold], [p for _, p in gold]
    pairs = [links[k] for k in kept]

    def score(chosen: list[set[Link]]) -> float:
        return aer(chosen, sure, possible)

    skipped = len(links) - len(kept)
    if skipped:
        log.warning(
            "AER: skipped %d pairs whose pieces are not the gold's words in one "
            "direction or the other",
            skipped,
        )
    return SymmetrizedScores(
        forward=score([pair.forward for pair in pairs]),
        reverse=score([pair.reverse for pair in pairs]),
        rules={
            str(rule): score([pair.combined(rule, readout) for pair in pairs])
            for rule in Symmetrize
        },
        n_sentences=len(kept),
        skipped=skipped,
        forward_pair=_pair(forward, "forward"),
        reverse_pair=_pair(reverse, "reverse"),
        readout=readout.describe(),
    )


def _pair(translator: Translator, default: str) -> str:
    """``en->fr``: the direction ``translator`` was trained in (``default`` when it
    did not come from a checkpoint)."""
    if translator.config is None:
        return default
    return f"{translator.config.data.src_lang}->{translator.config.data.tgt_lang}"
