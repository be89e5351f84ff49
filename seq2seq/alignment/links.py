"""Word alignments as link sets: Pharaoh text in and out, and the alignment error rate.

Links are ``(i, j)`` pairs with ``i`` a source word index and ``j`` a target word
index, the Pharaoh ``i-j`` convention (``i?j``: a possible link), over whitespace words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from seq2seq.alignment.maps import as_numpy

_LINK = re.compile(r"^(\d+)([-?])(\d+)$")

Link = tuple[int, int]


def parse_pharaoh(text: str) -> tuple[set[Link], set[Link]]:
    """Parse ``"0-0 1?2 ..."`` into ``(sure, possible)``; ``possible`` ⊇ ``sure``."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in text.split():
        match = _LINK.match(token)
        if match is None:
            raise ValueError(f"bad link {token!r} in {text!r}; want i-j or i?j")
        link = (int(match.group(1)), int(match.group(3)))
        possible.add(link)
        if match.group(2) == "-":
            sure.add(link)
    return sure, possible


def aer(
    predicted: Sequence[set[Link]],
    sure: Sequence[set[Link]],
    possible: Sequence[set[Link]],
) -> float:
    """Alignment error rate over a corpus (Och & Ney 2003).

    ``AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)`` with counts summed over sentences;
    ``P`` is taken as ``P ∪ S``. Lower is better; 0 is a perfect alignment.
    """
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(
            f"got {len(predicted)} predicted, {len(sure)} sure and {len(possible)} "
            "possible alignments; they must have one entry per sentence"
        )
    hit_sure = hit_possible = size_a = size_s = 0
    for a, s, p in zip(predicted, sure, possible, strict=True):
        a, s = set(a), set(s)
        p = set(p) | s
        hit_sure += len(a & s)
        hit_possible += len(a & p)
        size_a += len(a)
        size_s += len(s)
    if size_a + size_s == 0:
        return 0.0
    return 1.0 - (hit_sure + hit_possible) / (size_a + size_s)


def to_pharaoh(weights: Any, threshold: float | None = None) -> str:
    """Hard alignment of ``weights (T, S)`` as sorted Pharaoh links ``i-j``.

    ``i`` is the source index and ``j`` the target index. Without ``threshold`` each
    target row links to its argmax source column (all-zero rows are skipped); with it,
    every cell with weight >= ``threshold`` is a link.
    """
    w = np.asarray(as_numpy(weights), dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"weights must be (T, S), got shape {tuple(w.shape)}")
    if threshold is None:
        links = [(int(np.argmax(row)), j) for j, row in enumerate(w) if row.any()]
    else:
        links = [
            (int(i), int(j)) for j, i in zip(*np.nonzero(w >= threshold), strict=True)
        ]
    return " ".join(f"{i}-{j}" for i, j in sorted(links))
