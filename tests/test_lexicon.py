"""IBM Model 1 lexicons, their mix with attention, and the two-way readout's knobs."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from seq2seq.alignment.lexicon import UNSEEN, train_lexicon, weigh
from seq2seq.alignment.symmetrize import geometric


def test_two_em_steps_worked_by_hand():
    # t starts uniform (1/2). Step 1: "a b"/"x y" gives each of (x|a) (x|b) (y|a) (y|b)
    # a count of 1/2, "a"/"x" gives (x|a) 1: t(x|a) = 1.5/2, t(x|b) = 1/2.
    lexicon = train_lexicon(["a b", "a"], ["x y", "x"], iterations=1)
    assert lexicon.prob("a", "x") == pytest.approx(0.75)
    assert lexicon.prob("a", "y") == pytest.approx(0.25)
    assert lexicon.prob("b", "x") == pytest.approx(0.5)
    # Step 2: in "a b"/"x y", x goes to a with .75/(.75+.5) = .6, y with
    # .25/(.25+.5) = 1/3; with the 1 of "a"/"x": t(x|a) = 1.6 / (1.6 + 1/3).
    lexicon = train_lexicon(["a b", "a"], ["x y", "x"], iterations=2)
    assert lexicon.prob("a", "x") == pytest.approx(1.6 / (1.6 + 1 / 3))
    assert lexicon.prob("b", "x") == pytest.approx(0.4 / (0.4 + 2 / 3))
    assert lexicon.prob("b", "y") == pytest.approx((2 / 3) / (0.4 + 2 / 3))
    assert lexicon.prob("a", "nope") == 0 and lexicon.prob("nope", "x") == 0


def _corpus(seed: int, n: int = 60) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    src_words, tgt_words = list("abcdef"), list("uvwxyz")
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(6) for _ in range(rng.randint(1, 5))]
        src.append(" ".join(src_words[i] for i in idx))
        kept = idx if rng.random() < 0.5 else list(reversed(idx))
        noise = [rng.randrange(6)] if rng.random() < 0.3 else []
        tgt.append(" ".join(tgt_words[i] for i in kept + noise))
    return src, tgt


def _dense_ibm1(src, tgt, iterations):
    """A direct reading of Brown et al.'s EM, one dense table, for comparison."""
    sv = sorted({w for s in src for w in s.split()})
    tv = sorted({w for t in tgt for w in t.split()})
    table = {(f, e): 1 / len(tv) for f in tv for e in sv}
    for _ in range(iterations):
        counts = dict.fromkeys(table, 0.0)
        for s, t in zip(src, tgt, strict=True):
            for f in t.split():
                total = sum(table[f, e] for e in s.split())
                for e in s.split():
                    counts[f, e] += table[f, e] / total
        per_e = {e: sum(counts[f, e] for f in tv) for e in sv}
        table = {(f, e): c / per_e[e] for (f, e), c in counts.items()}
    return table


def test_the_sparse_table_equals_a_dense_reading_of_em():
    src, tgt = _corpus(0)
    lexicon = train_lexicon(src, tgt, iterations=4)
    dense = _dense_ibm1(src, tgt, 4)
    for (f, e), value in dense.items():
        assert lexicon.prob(e, f) == pytest.approx(value, abs=1e-12)


def _log_likelihood(lexicon, src, tgt) -> float:
    total = 0.0
    for s, t in zip(src, tgt, strict=True):
        table = lexicon.posterior(s.split(), t.split(), smooth=False)
        total += float(np.log(table.mean(axis=1)).sum())
    return total


def test_each_em_step_raises_the_likelihood():
    src, tgt = _corpus(1)
    values = [
        _log_likelihood(train_lexicon(src, tgt, k), src, tgt) for k in range(1, 7)
    ]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(values))
    assert values[-1] > values[0] + 1  # and learns something


def test_posterior_rows_are_distributions_and_unknown_words_uniform():
    lexicon = train_lexicon(["a b", "a"], ["x y", "x"], iterations=3)
    post = lexicon.posterior(["a", "b", "q"], ["x", "y", "unknown"])
    np.testing.assert_allclose(post.sum(axis=1), 1)
    assert post[0, 0] > post[0, 1] > post[0, 2]  # x: a, then b, then the unseen q
    assert post[0, 2] < 10 * UNSEEN
    np.testing.assert_allclose(post[2], 1 / 3)  # a word never seen: no opinion
    assert lexicon.posterior([], ["x"]).shape == (1, 0)


def test_training_refuses_bad_input():
    with pytest.raises(ValueError, match="2 source and 1 target texts"):
        train_lexicon(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="iterations=0"):
        train_lexicon(["a"], ["x"], iterations=0)
    with pytest.raises(ValueError, match="no pair has words on both sides"):
        train_lexicon(["a", " "], ["", "x"])


def test_weigh_mixes_log_linearly_and_renormalizes():
    attention = np.array([[0.6, 0.4], [0.0, 0.0]])
    lexical = np.array([[0.2, 0.8], [0.5, 0.5]])
    assert weigh(attention, lexical, 0.0) is attention
    mixed = weigh(attention, lexical, 0.5)
    first = np.sqrt([0.6 * 0.2, 0.4 * 0.8])
    np.testing.assert_allclose(mixed[0], first / first.sum())
    np.testing.assert_array_equal(mixed[1], [0, 0])  # an empty row stays empty
    np.testing.assert_allclose(weigh(attention[:1], lexical[:1], 1.0), lexical[:1])
    with pytest.raises(ValueError, match="same"):
        weigh(attention, lexical[:1], 0.5)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        weigh(attention, lexical, 1.5)


def test_geometric_floor_and_add_by_hand():
    forward = np.array([[0.8, 0.2, 0.0], [0.1, 0.5, 0.4], [0.0, 0.1, 0.9]])
    reverse = np.array([[0.5, 0.0, 0.0], [0.5, 0.2, 0.9], [0.0, 0.8, 0.1]])
    # √(f·r): [[.632, 0, 0], [.224, .316, .6], [0, .283, .3]]
    plain = {(0, 0), (2, 1), (2, 2), (1, 1)}
    assert geometric(forward, reverse, floor=0.0, add=None) == plain
    # floor .31: row 2's best (2-2 at .3) goes; column 2's best is row 1 (2-1).
    assert geometric(forward, reverse, floor=0.31) == {(0, 0), (2, 1), (1, 1)}
    # add .29: 2-2 (.3) is kept; floor .31 with add .29 keeps it too.
    assert geometric(forward, reverse, floor=0.31, add=0.29) == plain
    # add .2: also 0-1 (.224) and 1-2 (.283).
    assert geometric(forward, reverse, add=0.2) == plain | {(0, 1), (1, 2)}
