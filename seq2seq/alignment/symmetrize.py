"""Symmetrized word alignments: two directions' link sets combined into one.

A model trained source→target links each *target* word to one source word; one trained
the other way links each *source* word to one target word. Each misses what the other
sees (a French word linked to two English ones, say), and their errors differ, so SMT
aligners combine both directions (Och & Ney 2003; Koehn et al. 2003):

- ``intersection``: the links both directions agree on; few, and precise.
- ``union``: every link of either; many, and recalls most of the gold.
- ``grow-diag-final-and``: start from the intersection and grow it toward the union
  (Koehn et al. 2003; Moses ``symal -a=g -d=yes -f=yes -b=yes``). *grow-diag*: repeat,
  until a pass adds nothing, a scan of the current links in target-major order (Koehn's
  outer loop runs over the English words ``e``, the target of a foreign→English
  system); each link's neighbours (``NEIGHBOURS``: the 4 sides, then the 4
  diagonals) that are union links join when their source or their target word is
  still unaligned. A link added during a pass is scanned in that pass when it comes
  later in the order. *final-and*: then each forward link, then each reverse link, in
  the same order, joins when both its words are still unaligned.

- ``geometric``: not a rule over links but over the attention itself: the two
  directions' word-level attention (the reverse one transposed) multiplied and rooted,
  ``M = √(A ∘ Bᵀ)``, then every target word linked to its best source word in ``M``
  and every source word to its best target word, and the two link sets united. A link
  survives only where *both* models put weight, yet a word may keep several links
  (a column's best and a row's best). On the phrasebook it beats the three link rules
  for every model pair (docs/results.md, "Symmetrized alignments"). Two thresholds
  refine it: ``floor`` leaves a target word unaligned when even its best link is
  weak, ``add`` links every pair above a weight, so a word may keep two.

The link rules take ``forward`` (the source→target model's links) and ``reverse``
(the target→source model's links already transposed into ``(source, target)`` order:
``transpose``), sets of ``(i, j)`` with ``i`` a source and ``j`` a target word index,
the Pharaoh convention of ``links.py``. The order matters only when two links
compete for one unaligned word; this one is Moses symal's. fast_align's ``atools``
scans the candidate links instead of the current ones, so there a diagonal candidate
can win a word that a side neighbour wins here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from seq2seq.alignment.links import Link
from seq2seq.config import Symmetrize

# Koehn's neighbourhood as (target, source) steps: the 4 sides, then the 4 diagonals
# (the "diag" of the name).
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def _target_major(link: Link) -> tuple[int, int]:
    return link[1], link[0]


def transpose(links: Iterable[Link]) -> set[Link]:
    """``(i, j)`` → ``(j, i)``: a target→source model's links in source-target order."""
    return {(j, i) for i, j in links}


def intersection(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """The links both directions have."""
    return set(forward) & set(reverse)


def union(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """The links either direction has."""
    return set(forward) | set(reverse)


class _Growing:
    """A link set with the words it aligns on each side, grown one link at a time."""

    def __init__(self, links: Iterable[Link]) -> None:
        self.links: set[Link] = set()
        self.src: set[int] = set()
        self.tgt: set[int] = set()
        for link in links:
            self.add(link)

    def add(self, link: Link) -> None:
        self.links.add(link)
        self.src.add(link[0])
        self.tgt.add(link[1])

    def either_unaligned(self, link: Link) -> bool:
        return link[0] not in self.src or link[1] not in self.tgt

    def both_unaligned(self, link: Link) -> bool:
        return link[0] not in self.src and link[1] not in self.tgt


def grow_diag(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """The intersection grown toward the union over the 8-neighbourhood (see the
    module docstring), without the final step."""
    return _grow_diag(forward, reverse).links


def _grow_diag(forward: set[Link], reverse: set[Link]) -> _Growing:
    candidates = union(forward, reverse)
    # Current links are always union links, so scanning the union in target-major
    # order and skipping what is not (yet) a link is the scan of the current links.
    order = sorted(candidates, key=_target_major)
    grown = _Growing(intersection(forward, reverse))
    added = True
    while added:
        added = False
        for i, j in order:
            if (i, j) not in grown.links:
                continue
            for dj, di in NEIGHBOURS:
                near = (i + di, j + dj)
                if (
                    near in candidates
                    and near not in grown.links
                    and grown.either_unaligned(near)
                ):
                    grown.add(near)
                    added = True
    return grown


def grow_diag_final_and(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """grow-diag, then final-and: forward links, then reverse links, each joining
    when both its words are still unaligned."""
    grown = _grow_diag(forward, reverse)
    for direction in (forward, reverse):
        for link in sorted(direction, key=_target_major):
            if grown.both_unaligned(link):
                grown.add(link)
    return grown.links


RULES: dict[Symmetrize, Callable[[set[Link], set[Link]], set[Link]]] = {
    Symmetrize("intersection"): intersection,
    Symmetrize("union"): union,
    Symmetrize("grow-diag-final-and"): grow_diag_final_and,
}


def symmetrize(
    forward: set[Link], reverse: set[Link], rule: Symmetrize | str
) -> set[Link]:
    """``forward`` and ``reverse`` (both in source-target order) combined by ``rule``:
    ``intersection``, ``union`` or ``grow-diag-final-and`` (``geometric`` needs the
    attention: ``twoway.TwoWay.combined``)."""
    rule = Symmetrize(rule)
    if rule not in RULES:
        raise ValueError(f"symmetrize={rule} combines attention, not links")
    return RULES[rule](forward, reverse)


def geometric(
    forward: np.ndarray,
    reverse: np.ndarray,
    floor: float = 0.0,
    add: float | None = None,
) -> set[Link]:
    """Links ``{(i, j)}`` of the geometric mean ``M = √(forward ∘ reverse)`` of two
    ``(target words, source words)`` attention matrices (the reverse model's already
    transposed): each target word's best source word (when its weight is at least
    ``floor``: a word the two models agree nowhere on stays unaligned), each source
    word's best target word, and, with ``add``, every pair whose weight is at least
    ``add`` (a word translated by two, ``not`` by ``ne … pas``). A row or column
    that is zero throughout (the two models share no weight there) links nothing."""
    if forward.shape != reverse.shape:
        raise ValueError(
            f"forward attention {forward.shape} and transposed reverse attention "
            f"{reverse.shape} must cover the same (target, source) words"
        )
    mean = np.sqrt(forward * reverse)
    links: set[Link] = set()
    for j, row in enumerate(mean):
        if row.size and row.max() > 0 and row.max() >= floor:
            links.add((int(row.argmax()), j))
    for i, column in enumerate(mean.T):
        if column.size and column.max() > 0:
            links.add((i, int(column.argmax())))
    if add is not None:
        targets, sources = np.nonzero((mean >= add) & (mean > 0))
        links.update((int(i), int(j)) for j, i in zip(targets, sources, strict=True))
    return links
