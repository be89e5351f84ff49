"""Do attention and gradient × input point where occlusion does? Per target word,
whether each method's strongest source word is the one whose knock-out costs the
written word the most log-probability, and each method's AER against gold links.

Every pair is forced through its target (the references, whose words the gold links
count), and every method is read at the word level as AER reads attention
(``words.word_matrix``: a source word sums its pieces, a target word averages its
pieces' rows; end-of-sentence rows and columns dropped). Occlusion is the causal
reference here: its argmax is the source word the written word needed most.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from seq2seq.alignment.attribution import model_attribution
from seq2seq.alignment.links import Link, aer, parse_pharaoh
from seq2seq.alignment.words import argmax_links, pair_pieces, word_matrix
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import occlusion_maps
from seq2seq.model.seq2seq import Seq2Seq

ATTENTION, GRADIENT, OCCLUSION = "attention", "gradient", "occlusion"


@dataclass
class MethodAgreement:
    """agree: per pair of methods (``"attention=occlusion"``, ...), the share of
    target words whose argmax source word is the same; aer: per method, its argmax
    links' AER against the gold (None without gold); counted over ``n_words``
    target words of ``n_sentences`` pairs, ``skipped`` pairs whose pieces are not
    their texts' words."""

    n_sentences: int
    n_words: int
    skipped: int
    agree: dict[str, float] = field(default_factory=dict)
    aer: dict[str, float | None] = field(default_factory=dict)

    def summary(self) -> str:
        agree = ", ".join(f"{k} {100 * v:.1f}%" for k, v in self.agree.items())
        errs = ", ".join(
            f"{k} {'-' if v is None else f'{100 * v:.1f}%'}"
            for k, v in self.aer.items()
        )
        return (
            f"{self.n_sentences} pairs, {self.n_words} target words"
            f" ({self.skipped} pairs skipped): same argmax source word: {agree};"
            f" AER: {errs}"
        )


def word_maps(
    translator: Translator, split: EncodedSplit, gradient: bool = True
) -> list[dict[str, np.ndarray] | None]:
    """Per pair forced through its target, each method's ``(target words, source
    words)`` matrix (attention, occlusion, and gradient × input when ``gradient``
    and the model is one ``Seq2Seq``); None for a pair whose pieces do not regroup
    into its texts' words."""
    forced = translator.forced_attention(split)
    drops = occlusion_maps(translator, split)
    explain = gradient and isinstance(translator.model, Seq2Seq)
    tok = translator.tokenizer
    out: list[dict[str, np.ndarray] | None] = []
    for k in range(len(split)):
        pieces = pair_pieces(tok, split, k)
        if pieces is None:
            out.append(None)
            continue
        src, tgt = pieces
        maps = {
            ATTENTION: word_matrix(forced[k].weights, src, tgt),
            OCCLUSION: word_matrix(drops[k].numpy(), src, tgt),
        }
        if explain:
            attr = model_attribution(translator, split.src_ids[k], split.tgt_ids[k])
            maps[GRADIENT] = word_matrix(attr.cpu().numpy(), src, tgt)
        out.append(maps)
    return out


def method_agreement(
    translator: Translator, split: EncodedSplit, gradient: bool = True
) -> MethodAgreement:
    """``MethodAgreement`` of ``split`` forced through its targets (module
    docstring); AER only where ``split.alignment`` holds gold links."""
    per_pair = word_maps(translator, split, gradient)
    kept = [(k, m) for k, m in enumerate(per_pair) if m is not None]
    methods = list(kept[0][1]) if kept else [ATTENTION, OCCLUSION]
    pairs = [(a, b) for i, a in enumerate(methods) for b in methods[i + 1 :]]
    same = dict.fromkeys(pairs, 0)
    links: dict[str, list[set[Link]]] = {m: [] for m in methods}
    sure: list[set[Link]] = []
    possible: list[set[Link]] = []
    words = 0
    for k, maps in kept:
        best = {m: maps[m].argmax(axis=1) for m in methods}
        words += len(best[ATTENTION])
        for a, b in pairs:
            same[(a, b)] += int((best[a] == best[b]).sum())
        for m in methods:
            links[m].append(argmax_links(maps[m]))
        if split.alignment is not None:
            s, p = parse_pharaoh(split.alignment[k])
            sure.append(s)
            possible.append(p)
    gold = split.alignment is not None and kept
    return MethodAgreement(
        n_sentences=len(kept),
        n_words=words,
        skipped=len(per_pair) - len(kept),
        agree={f"{a}={b}": same[(a, b)] / max(words, 1) for a, b in pairs},
        aer={m: aer(links[m], sure, possible) if gold else None for m in methods},
    )
