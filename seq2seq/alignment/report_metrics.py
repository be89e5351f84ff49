"""The corpus report's numbers per sentence, each from one attention map: how spread
its rows are, how evenly it covers the source words, whether it points where an
attribution points, and how it errs against gold links.

``A`` is a map's piece matrix ``(T + 1, S + 1)`` (rows the target pieces and the EOS
step, columns the source pieces and the source EOS), ``a_t`` its row ``t``. The word
matrix ``M`` (``words.word_matrix``, as AER reads attention) has a row per target
word (the mean of its pieces' rows) and a column per source word (the sum of its
pieces' columns); the EOS row and column are dropped.

- entropy: ``H = (1 / (T + 1)) Σ_t −Σ_j a_tj ln a_tj`` in nats (``0 ln 0 = 0``): 0
  when every row looks at one piece, ``ln(S + 1)`` when every row is uniform.
- coverage deviation: with ``c_w = Σ_i M_iw`` what source word ``w`` received over
  the translation, ``D = (1 / W) Σ_w |c_w − 1|``: 0 when each word was attended
  exactly once; a word skipped (``c_w ≈ 0``) or read again and again (``c_w ≥ 2``)
  adds about 1. ``coverage_outliers`` counts the words with ``c_w < 0.5`` or
  ``c_w > 1.5``.
- disagreement: the share of target words whose strongest source word in ``M``
  differs from the strongest in the attribution's word matrix (occlusion's drops or
  gradient × input, read the same way): ``1 − (1/|I|) Σ_i [argmax_w M_iw =
  argmax_w M'_iw]``, ties to the first word, as ``agreement.py`` counts them.
- AER: each target word linked to its strongest source word (``argmax_links``),
  against the gold sure and possible links (``links.aer`` on one sentence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seq2seq.alignment.links import aer, parse_pharaoh
from seq2seq.alignment.words import argmax_links, word_matrix

LOW, HIGH = 0.5, 1.5  # coverage_outliers: a word attended under half or over 1.5 times


def attention_entropy(weights: Any) -> float:
    """``H``: the mean over rows of each row's entropy, in nats."""
    a = np.asarray(weights, dtype=np.float64)
    logs = np.log(np.where(a > 0, a, 1.0))
    return float((-(a * logs).sum(axis=-1)).mean()) if a.size else 0.0


def coverage(weights: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str]):
    """``c_w`` per source word: the column sums of the word matrix ``M``."""
    return word_matrix(weights, src_pieces, tgt_pieces).sum(axis=0)


def coverage_deviation(
    weights: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> float:
    """``D = mean_w |c_w − 1|`` (0 for a sentence without source words)."""
    c = coverage(weights, src_pieces, tgt_pieces)
    return float(np.abs(c - 1.0).mean()) if c.size else 0.0


def coverage_outliers(
    weights: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> int:
    """The source words attended under ``LOW`` or over ``HIGH`` times."""
    c = coverage(weights, src_pieces, tgt_pieces)
    return int(((c < LOW) | (c > HIGH)).sum())


def disagreement(
    weights: Any,
    attribution: Any,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
) -> float | None:
    """The share of target words whose strongest source word differs between the
    attention and the attribution (both piece matrices of one shape); None without
    target or source words."""
    m = word_matrix(weights, src_pieces, tgt_pieces)
    other = word_matrix(attribution, src_pieces, tgt_pieces)
    if not m.size:
        return None
    return float((m.argmax(axis=1) != other.argmax(axis=1)).mean())


def sentence_aer(
    weights: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str], gold: str
) -> float:
    """The AER of the attention's argmax word links against ``gold`` (Pharaoh,
    ``i-j`` sure, ``i?j`` possible, over whitespace words)."""
    sure, possible = parse_pharaoh(gold)
    links = argmax_links(word_matrix(weights, src_pieces, tgt_pieces))
    return aer([links], [sure], [possible])
