"""The corpus report's contents: a split translated and explained sentence by
sentence, every stage batched over the split.

One search translates every source; one forced pass through the translations gives
each sentence's attention (and the encoder's self-attention); occlusion
(``decoding.whatif.occlusion_maps``, pairs sharing forced passes) or gradient × input
gives the attribution; where the split has gold links, one forced pass through the
references gives the attention AER reads (gold indices count the reference's
words). Each sentence then gets its scores and ``report_metrics``' numbers;
``report_page`` draws them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from seq2seq.alignment.attribution import model_attribution, spearman
from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.occlusion import OCCLUSION, shares
from seq2seq.alignment.report_metrics import (
    attention_entropy,
    coverage_deviation,
    coverage_outliers,
    disagreement,
    sentence_aer,
)
from seq2seq.alignment.words import pair_pieces
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.maps import forced_split
from seq2seq.decoding.scores import sentence_scores
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import occlusion_maps

GRADIENT = "gradient"


@dataclass
class SentenceRow:
    """One sentence's line of the report: its texts, its scores against the
    reference (sacreBLEU, 0-100) and its attention's numbers (``report_metrics``);
    ``aer`` None without gold links (or pieces that are not the reference's
    words), ``disagreement`` None without an attribution."""

    index: int
    src: str
    hyp: str
    ref: str
    bleu: float
    chrf: float
    entropy: float
    coverage: float
    outliers: int
    disagreement: float | None = None
    spearman: float | None = None
    aer: float | None = None


@dataclass
class CorpusReport:
    """Per sentence its row, its map (the translation's attention, with the
    attribution when computed) and, where gold links exist, the map of its reference
    with the gold attached; ``method`` the attribution's (None: none)."""

    split: str
    rows: list[SentenceRow]
    maps: list[AttentionMap]
    reference_maps: list[AttentionMap | None] = field(default_factory=list)
    method: str | None = OCCLUSION
    seconds: dict[str, float] = field(default_factory=dict)  # per stage, wall clock


def corpus_report(
    translator: Translator,
    split: EncodedSplit,
    name: str,
    indices: Sequence[int] | None = None,
    method: str | None = OCCLUSION,
) -> CorpusReport:
    """The report of ``split`` (its pairs numbered by ``indices``, default 0..n-1;
    ``name`` the split's): the model's translations, their attention and
    ``method``'s attribution (``occlusion``, ``gradient`` or None), the scores and
    metrics of each sentence."""
    indices = list(range(len(split))) if indices is None else list(indices)
    titles = [f"{name} {i}" for i in indices]
    clock = _Clock()
    hyps = translator.hypotheses(split)
    forced = forced_split(split, [h.tokens for h in hyps])
    forced.tgt_text = translator.detokenize(hyps)
    clock.lap("translation")
    maps = translator.attention_maps(forced, titles)
    clock.lap("attention")
    raw = _attribute(translator, forced, maps, method)
    clock.lap(method or "no attribution")
    refs = _reference_maps(translator, split, titles)
    clock.lap("references")
    scores = sentence_scores(forced.tgt_text, list(split.tgt_text))
    rows = []
    for k, att in enumerate(maps):
        src, tgt = att.src_tokens[:-1], att.tgt_tokens[:-1]
        rows.append(
            SentenceRow(
                index=indices[k],
                src=split.src_text[k],
                hyp=forced.tgt_text[k],
                ref=split.tgt_text[k],
                bleu=scores[k][0],
                chrf=scores[k][1],
                entropy=attention_entropy(att.weights),
                coverage=coverage_deviation(att.weights, src, tgt),
                outliers=coverage_outliers(att.weights, src, tgt),
                disagreement=None
                if raw is None
                else disagreement(att.weights, raw[k], src, tgt),
                spearman=_finite(att.spearman),
                aer=_aer(translator, split, k, refs[k]),
            )
        )
    clock.lap("scores and metrics")
    return CorpusReport(name, rows, maps, refs, method, clock.seconds)


class _Clock:
    """Wall-clock seconds per stage, for the command's last line."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = now - self.start
        self.start = now


def _attribute(
    translator: Translator,
    split: EncodedSplit,
    maps: Sequence[AttentionMap],
    method: str | None,
) -> list[np.ndarray] | None:
    """Each map's attribution as the page draws it (occlusion's shares, gradient
    × input), its Spearman ρ with the weights; returns the matrices the
    disagreement reads (occlusion's drops in nats, the gradient's map)."""
    if method is None:
        return None
    if method == OCCLUSION:
        raw = [d.numpy() for d in occlusion_maps(translator, split)]
    elif method == GRADIENT:
        raw = [
            model_attribution(translator, s, t).cpu().numpy()
            for s, t in zip(split.src_ids, split.tgt_ids, strict=True)
        ]
    else:
        raise ValueError(f"attribution method {method!r}: occlusion or gradient")
    for att, r in zip(maps, raw, strict=True):
        att.attribution = shares(r) if method == OCCLUSION else r
        att.attribution_method = (
            OCCLUSION if method == OCCLUSION else "gradient × input"
        )
        att.spearman = spearman(att.weights, r)
    return raw


def _reference_maps(
    translator: Translator, split: EncodedSplit, titles: Sequence[str]
) -> list[AttentionMap | None]:
    """Where the split has gold links: each pair forced through its reference, with
    its gold; else None per pair."""
    if split.alignment is None:
        return [None] * len(split)
    ref_titles = [f"{t}: the reference, gold links outlined" for t in titles]
    return list(translator.attention_maps(split, ref_titles, with_gold=True))


def _aer(
    translator: Translator, split: EncodedSplit, k: int, ref: AttentionMap | None
) -> float | None:
    if (
        ref is None
        or not ref.gold
        or pair_pieces(translator.tokenizer, split, k) is None
    ):
        return None
    return sentence_aer(ref.weights, ref.src_tokens[:-1], ref.tgt_tokens[:-1], ref.gold)


def _finite(value: float | None) -> float | None:
    return None if value is None or np.isnan(value) else float(value)
