"""Word translation tables (IBM Model 1, trained by EM) to weigh attention with.

Attention links a target word to the source word the decoder reads while it predicts
it, and in reordered phrases that runs a word off (``two days ago`` → ``il y a deux
jours``: ``il`` reads ``days``); a lexical model knows which words translate which,
wherever they stand, but not where they stand. Multiplied, each corrects the other
(docs/results.md, "Symmetrized alignments"). IBM Model 1 (Brown et al. 1993) is the
lexical model of the SMT aligners: ``t(f | e)``, the probability that source word
``e`` translates as target word ``f``, estimated by EM on the training pairs alone,
so no gold link is read. Without a NULL word: its mass would be renormalized away
when the posterior is mixed with attention over the real words.

The table is sparse (only the word pairs that meet in a training pair), so it fits a
corpus of any vocabulary; words are whitespace tokens, as in the gold alignments.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

# Weight of a word pair that never met in training, relative to a row's sum: small
# enough not to link, large enough that attention still ranks such pairs.
UNSEEN = 1e-6


@dataclass(frozen=True)
class Lexicon:
    """``t(target word | source word)`` for the word pairs seen together in training:
    ``probs[k]`` for the pair coded ``codes[k] = target * len(src_vocab) + source``
    (``codes`` sorted)."""

    src_vocab: dict[str, int]
    tgt_vocab: dict[str, int]
    codes: np.ndarray
    probs: np.ndarray

    def prob(self, src_word: str, tgt_word: str) -> float:
        """``t(tgt_word | src_word)``; 0 for a pair never seen together."""
        return float(self.posterior([src_word], [tgt_word], smooth=False)[0, 0])

    def posterior(
        self,
        src_words: Sequence[str],
        tgt_words: Sequence[str],
        smooth: bool = True,
    ) -> np.ndarray:
        """``(target words, source words)``: each target word's distribution over the
        source words, ``∝ t(f_j | e_i)`` (IBM Model 1's alignment posterior).
        ``smooth`` adds ``UNSEEN`` to every cell and normalizes each row; a row with no
        known pair becomes uniform. Without it, the raw table values."""
        n_src = len(self.src_vocab)
        s = np.array([self.src_vocab.get(w, -1) for w in src_words], dtype=np.int64)
        t = np.array([self.tgt_vocab.get(w, -1) for w in tgt_words], dtype=np.int64)
        out = np.zeros((len(t), len(s)))
        if len(s) and len(t) and len(self.codes):
            codes = (t[:, None] * n_src + s[None, :]).ravel()
            at = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
            known = (
                (self.codes[at] == codes)
                & np.repeat(t >= 0, len(s))
                & np.tile(s >= 0, len(t))
            )
            out = np.where(known, self.probs[at], 0.0).reshape(len(t), len(s))
        if not smooth:
            return out
        out = out + UNSEEN
        return out / out.sum(axis=1, keepdims=True)


def train_lexicon(
    src_texts: Sequence[str], tgt_texts: Sequence[str], iterations: int = 10
) -> Lexicon:
    """IBM Model 1 ``t(f | e)`` from parallel texts by ``iterations`` EM steps from a
    uniform start (each step raises the corpus likelihood). Pairs with an empty side
    are skipped.

    Raises:
        ValueError: the texts differ in length, ``iterations`` < 1, or no pair has
            words on both sides.
    """
    if len(src_texts) != len(tgt_texts):
        raise ValueError(
            f"lexicon: {len(src_texts)} source and {len(tgt_texts)} target texts; "
            "want one of each per pair"
        )
    if iterations < 1:
        raise ValueError(f"lexicon: iterations={iterations}; want at least 1")
    src_vocab: dict[str, int] = {}
    tgt_vocab: dict[str, int] = {}
    pairs = []
    for src, tgt in zip(src_texts, tgt_texts, strict=True):
        s, t = src.split(), tgt.split()
        if s and t:
            pairs.append(
                (
                    [src_vocab.setdefault(w, len(src_vocab)) for w in s],
                    [tgt_vocab.setdefault(w, len(tgt_vocab)) for w in t],
                )
            )
    if not pairs:
        raise ValueError("lexicon: no pair has words on both sides")
    n_src = len(src_vocab)
    # One cell per (target token, source token) of every pair, and its target token.
    cells = np.concatenate(
        [
            (np.array(t)[:, None] * n_src + np.array(s)[None, :]).ravel()
            for s, t in pairs
        ]
    )
    token_of_cell = np.repeat(
        np.arange(sum(len(t) for _, t in pairs)),
        np.concatenate([np.full(len(t), len(s)) for s, t in pairs]),
    )
    codes, pair_of_cell = np.unique(cells, return_inverse=True)
    src_of_pair = codes % n_src
    probs = np.full(len(codes), 1.0 / len(tgt_vocab))
    for _ in range(iterations):
        weight = probs[pair_of_cell]
        weight /= np.bincount(token_of_cell, weights=weight)[token_of_cell]
        counts = np.bincount(pair_of_cell, weights=weight, minlength=len(codes))
        probs = counts / np.bincount(src_of_pair, weights=counts)[src_of_pair]
    log.info(
        "lexicon: IBM Model 1, %d EM steps over %d pairs, %d x %d words, %d word pairs",
        iterations,
        len(pairs),
        n_src,
        len(tgt_vocab),
        len(codes),
    )
    return Lexicon(src_vocab, tgt_vocab, codes, probs)


def weigh(attention: np.ndarray, lexical: np.ndarray, weight: float) -> np.ndarray:
    """``attention^(1-weight) ∘ lexical^weight``, each row normalized to sum 1: a
    log-linear mix of two ``(target, source)`` word distributions. ``weight`` 0
    returns ``attention`` itself; a row that is zero throughout stays zero.

    Raises:
        ValueError: the shapes differ, or ``weight`` is outside [0, 1].
    """
    if attention.shape != lexical.shape:
        raise ValueError(
            f"attention {attention.shape} and lexical posterior {lexical.shape} must "
            "cover the same (target, source) words"
        )
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"lexicon weight {weight}; want a value in [0, 1]")
    if weight == 0.0:
        return attention
    mixed = np.power(attention, 1.0 - weight) * np.power(lexical, weight)
    total = mixed.sum(axis=1, keepdims=True)
    return np.divide(mixed, total, out=np.zeros_like(mixed), where=total > 0)
