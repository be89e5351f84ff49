"""Combining two directions' word links: intersection, union, grow-diag-final-and."""

from __future__ import annotations

import random

import numpy as np
import pytest

from seq2seq.alignment.symmetrize import (
    geometric,
    grow_diag,
    grow_diag_final_and,
    intersection,
    symmetrize,
    transpose,
    union,
)
from seq2seq.config import Symmetrize

# A worked example on 6 source words (i) and 6 target words (j). The forward model
# links each target word to one source word, the reverse model each source word to
# one target word (here already transposed into (i, j) order):
#   forward: targets 0..5 -> sources 0, 1, 2, 5, 4, 0
#   reverse: sources 0..5 -> targets 0, 2, 2, 5, 5, 1
FORWARD = {(0, 0), (1, 1), (2, 2), (5, 3), (4, 4), (0, 5)}
REVERSE = {(0, 0), (1, 2), (2, 2), (3, 5), (4, 5), (5, 1)}


def test_intersection_union_and_transpose():
    assert intersection(FORWARD, REVERSE) == {(0, 0), (2, 2)}
    assert union(FORWARD, REVERSE) == FORWARD | REVERSE and len(FORWARD | REVERSE) == 10
    assert transpose({(0, 2), (1, 0)}) == {(2, 0), (0, 1)}
    assert intersection(set(), REVERSE) == set() and union(set(), set()) == set()


def test_grow_diag_final_and_worked_by_hand():
    # grow-diag from the intersection {00, 22}, scanning the links source-major:
    #   00: its diagonal neighbour 11 is a union link and target 1 is unaligned: add.
    #   11: neighbour 12 is a union link, but source 1 and target 2 are both aligned
    #       now: not added. 22: 12 again (no); nothing else of the union is near.
    #   A second pass adds nothing: grow-diag = {00, 11, 22}.
    assert grow_diag(FORWARD, REVERSE) == {(0, 0), (1, 1), (2, 2)}
    # final-and, forward links first, each only when both its words are unaligned:
    #   05: source 0 is aligned (no). 44: both free (add). 53: both free (add).
    # then the reverse links:
    #   12: both aligned (no). 35: source 3 and target 5 free (add).
    #   45: source 4 and target 5 now aligned (no). 51: both aligned (no).
    expected = {(0, 0), (1, 1), (2, 2), (4, 4), (5, 3), (3, 5)}
    assert grow_diag_final_and(FORWARD, REVERSE) == expected
    assert symmetrize(FORWARD, REVERSE, "grow-diag-final-and") == expected
    assert symmetrize(FORWARD, REVERSE, Symmetrize("intersection")) == {(0, 0), (2, 2)}
    assert symmetrize(FORWARD, REVERSE, "union") == FORWARD | REVERSE


def test_grow_repeats_passes_until_nothing_is_added():
    # Only 33 is agreed; the chain 22, 11, 00 lies before it in the scan order, so
    # each link is reached from the one added in the previous pass.
    forward = {(3, 3), (2, 2), (0, 0)}
    reverse = {(3, 3), (1, 1)}
    assert grow_diag(forward, reverse) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    # A link added later in the order is scanned in the same pass: 44 then 55.
    assert grow_diag({(3, 3), (4, 4)}, {(3, 3), (5, 5)}) == {(3, 3), (4, 4), (5, 5)}


def test_grow_scans_target_major_as_moses_symal():
    # Agreed: 02 and 21. Scanning by target word, 21 (target 1) comes first and its
    # diagonal 10 takes source word 1, so 12 finds both its words aligned. Scanning
    # by source word, 02 would come first and take source 1 with its side 12.
    forward = {(0, 2), (1, 0), (2, 1)}
    reverse = {(0, 2), (1, 2), (2, 1)}
    assert grow_diag(forward, reverse) == {(0, 2), (1, 0), (2, 1)}


def test_grow_uses_all_eight_neighbours_but_not_farther():
    centre = {(2, 2)}
    around = {(2 + di, 2 + dj) for di in (-1, 0, 1) for dj in (-1, 0, 1)} - centre
    for near in around:  # each neighbour alone joins (its words are unaligned)
        assert grow_diag(centre, centre | {near}) == centre | {near}
    far = {(0, 0), (4, 4), (2, 4), (0, 2)}
    assert grow_diag(centre, centre | far) == centre
    assert grow_diag_final_and(centre, centre | far) == centre | {(0, 0), (4, 4)}


def test_final_and_takes_forward_links_first_and_needs_both_words_unaligned():
    # Nothing agreed, nothing to grow from; two links compete for source word 0.
    assert grow_diag_final_and({(0, 0)}, {(0, 1)}) == {(0, 0)}
    assert grow_diag_final_and({(0, 1)}, {(0, 0)}) == {(0, 1)}
    # Far from the agreed 00: 33 joins (both words free), then 03 does not (both
    # aligned by now).
    assert grow_diag_final_and({(0, 0), (3, 3)}, {(0, 0), (0, 3)}) == {(0, 0), (3, 3)}
    # One free word is not enough for final-and (grow-diag-final would add 20); next
    # to a link, grow-diag adds it (10).
    assert grow_diag_final_and({(0, 0), (2, 0)}, {(0, 0)}) == {(0, 0)}
    assert grow_diag_final_and({(0, 0), (1, 0)}, {(0, 0)}) == {(0, 0), (1, 0)}


def _brute(forward, reverse, n_src, n_tgt):
    """Koehn's pseudocode read literally, on a boolean matrix ``a[e, f]`` with ``e`` a
    target (English) word and ``f`` a source (foreign) word:

    alignment = intersect(e2f, f2e); GROW-DIAG(); FINAL-AND(e2f); FINAL-AND(f2e)
    GROW-DIAG: iterate until no new points added: for e, for f: if (e, f) aligned:
      for each neighbouring point (e-new, f-new): if (e-new not aligned or f-new not
      aligned) and (e-new, f-new) in union(e2f, f2e): add it.
    FINAL-AND(a): for e-new, for f-new: if (e-new not aligned and f-new not aligned)
      and (e-new, f-new) in a: add it.

    ``e2f`` is the forward model's links (one per target word), ``f2e`` the reverse's.
    """
    e2f = np.zeros((n_tgt, n_src), bool)
    f2e = np.zeros((n_tgt, n_src), bool)
    for i, j in forward:
        e2f[j, i] = True
    for i, j in reverse:
        f2e[j, i] = True
    union_ = e2f | f2e
    a = e2f & f2e
    neighbouring = [(-1, 0), (0, -1), (1, 0), (0, 1)]  # then the diagonals
    neighbouring += [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    new_points = True
    while new_points:
        new_points = False
        for e in range(n_tgt):
            for f in range(n_src):
                if not a[e, f]:
                    continue
                for de, df in neighbouring:
                    en, fn = e + de, f + df
                    if not (0 <= en < n_tgt and 0 <= fn < n_src):
                        continue
                    free = not a[en].any() or not a[:, fn].any()
                    if free and union_[en, fn] and not a[en, fn]:
                        a[en, fn] = True
                        new_points = True
    for direction in (e2f, f2e):
        for e in range(n_tgt):
            for f in range(n_src):
                if not a[e].any() and not a[:, f].any() and direction[e, f]:
                    a[e, f] = True
    return {(int(f), int(e)) for e, f in zip(*np.nonzero(a), strict=True)}


def _random_pair(rng: random.Random):
    """One link per target word (forward) and per source word (reverse), mostly near
    the diagonal like real attention, sometimes anywhere."""
    n_src, n_tgt = rng.randint(1, 9), rng.randint(1, 9)

    def pick(k, n, m):
        if rng.random() < 0.3:
            return rng.randrange(n)
        centre = round(k * (n - 1) / max(m - 1, 1))
        return min(max(centre + rng.randint(-1, 1), 0), n - 1)

    forward = {(pick(j, n_src, n_tgt), j) for j in range(n_tgt)}
    reverse = {(i, pick(i, n_tgt, n_src)) for i in range(n_src)}
    return forward, reverse, n_src, n_tgt


def test_grow_diag_final_and_equals_a_brute_reading_of_the_algorithm():
    rng = random.Random(0)
    differs_from_union = 0
    for _ in range(3000):
        forward, reverse, n_src, n_tgt = _random_pair(rng)
        got = grow_diag_final_and(forward, reverse)
        assert got == _brute(forward, reverse, n_src, n_tgt), (forward, reverse)
        assert intersection(forward, reverse) <= got <= union(forward, reverse)
        differs_from_union += got != union(forward, reverse)
    assert differs_from_union > 500  # the cases do exercise the heuristic


def test_an_unknown_rule_names_the_choices():
    with pytest.raises(ValueError, match="intersection, union, grow-diag-final-and"):
        symmetrize(FORWARD, REVERSE, "grow-diag")


def test_geometric_mean_of_the_two_attentions_by_hand():
    # 3 target words (rows) x 3 source words (columns), the reverse model's attention
    # already transposed into the same orientation.
    forward = np.array([[0.8, 0.2, 0.0], [0.1, 0.5, 0.4], [0.0, 0.1, 0.9]])
    reverse = np.array([[0.5, 0.0, 0.0], [0.5, 0.2, 0.9], [0.0, 0.8, 0.1]])
    # √(f·r): [[.632, 0, 0], [.224, .316, .6], [0, .283, .3]]
    # links i-j (source-target): each row's best 0-0, 2-1, 2-2; each column's best
    # 0-0, 1-1 (.316 > .283), 2-1 (.6 > .3)
    assert geometric(forward, reverse) == {(0, 0), (2, 1), (2, 2), (1, 1)}
    # A word the two models share no weight on links nothing.
    assert geometric(np.eye(2), np.array([[1.0, 0.0], [1.0, 0.0]])) == {(0, 0)}
    assert geometric(np.zeros((0, 2)), np.zeros((0, 2))) == set()
    with pytest.raises(ValueError, match="same"):
        geometric(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="attention, not links"):
        symmetrize(FORWARD, REVERSE, "geometric")
