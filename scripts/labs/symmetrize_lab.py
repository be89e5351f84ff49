"""Which two-way readout of attention aligns best? Chosen on validation, scored on test.

For each pair of checkpoints (a source→target model and one trained the other way on
the same corpus), and for the mean of all pairs' attention (each direction's models
averaged, as an ensemble would), this reads word links from both directions' word-level
attention (the step that predicts each word, pieces regrouped as in
``seq2seq-evaluate alignment=true``) in several ways:

- ``argmax``: each direction's argmax links, combined by intersection, union or
  grow-diag-final-and (what ``seq2seq-evaluate ... reverse_checkpoint=`` reports);
- ``geo α`` / ``mean α``: the two directions' matrices combined first, by their
  geometric or arithmetic mean (``M = √(A ∘ Bᵀ)``, ``(A + Bᵀ) / 2``); each target word
  then links to every source word within ``α`` of its row's best, each source word to
  every target word within ``α`` of its column's best, and those two link sets are
  combined by the same rules.

``geo 1.0 union`` is what ``symmetrize=geometric`` computes, but for ties (the lab
keeps them all, the product the first word) and all-zero rows or columns (the lab links
every word there, the product none).

Each row picks its best readout on the validation split only and scores that one pick
on the test split, next to the test AER of argmax grow-diag-final-and. ``--subsets``
also scores ``geometric`` for the mean of every non-empty subset of the pairs on
validation, and the best subset once on test. ``--lexicon`` searches the two-way
readout of ``seq2seq-evaluate``/``-align`` (``two_way.lexicon``, ``.floor``, ``.add``:
IBM Model 1 lexicons trained on the train split, mixed into both directions'
attention, then ``geometric`` with its thresholds) over a grid, on validation: each
row's best, and the one setting best over all rows (the lowest mean ratio of its
validation AER to each row's best: the commands' default), each scored once on test.
Unsupervised: the gold is read only to score. Usage::

    python scripts/labs/symmetrize_lab.py bahdanau=EN_FR.pt,FR_EN.pt \
        luong_dot=A.pt,B.pt ...
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from seq2seq.alignment.lexicon import train_lexicon, weigh
from seq2seq.alignment.links import Link, aer, parse_pharaoh
from seq2seq.alignment.symmetrize import RULES, geometric, transpose
from seq2seq.alignment.twoway import swapped
from seq2seq.alignment.words import is_special, merge_subwords, regroup
from seq2seq.data.corpus import read_corpus
from seq2seq.data.splits import EncodedSplit, encode_corpus_split
from seq2seq.decoding.translator import Translator

ALPHAS = (1.0, 0.7, 0.5, 0.3)
SPLITS = ("validation", "test")
# The --lexicon grid: (lexicon weight, geometric floor, geometric add).
LEXICON_GRID = list(
    itertools.product(
        (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0), (0.0, 0.1, 0.2, 0.3), (None, 0.3, 0.4)
    )
)


def word_matrices(translator: Translator, split: EncodedSplit) -> list:
    """Per pair its word-level attention ``(T_words, S_words)`` at the step that
    predicts each word (EOS row and column dropped), or None when the pieces are not
    the texts' words."""
    out = []
    tok = translator.tokenizer
    for k, att in enumerate(translator.forced_attention(split)):
        src = tok.src_pieces(list(split.src_ids[k]))
        tgt = tok.tgt_pieces(list(split.tgt_ids[k]))
        if regroup(src, split.src_text[k]) is None or (
            regroup(tgt, split.tgt_text[k]) is None
        ):
            out.append(None)
            continue
        m, s, t = merge_subwords(att.weights, [*src, "</s>"], [*tgt, "</s>"])
        rows = [i for i, x in enumerate(t) if not is_special(x)]
        cols = [i for i, x in enumerate(s) if not is_special(x)]
        out.append(m[np.ix_(rows, cols)])
    return out


def within(m: np.ndarray, alpha: float) -> set[Link]:
    """``{(col, row)}``: per row of ``m`` every column with weight >= alpha × the
    row's best (alpha 1: its argmax, ties included)."""
    links = set()
    for j, row in enumerate(m):
        for i in np.nonzero(row >= alpha * row.max())[0]:
            links.add((int(i), j))
    return links


def readouts(fwd: np.ndarray, rev: np.ndarray) -> dict[str, tuple[set, set]]:
    """Name → (forward links, reverse links transposed), for one pair."""
    out = {"argmax": (within(fwd, 1.0), transpose(within(rev, 1.0)))}
    for kind in ("geo", "mean"):
        m = np.sqrt(fwd * rev.T) if kind == "geo" else (fwd + rev.T) / 2
        for alpha in ALPHAS:
            out[f"{kind} {alpha}"] = (within(m, alpha), transpose(within(m.T, alpha)))
    return out


def scores(fwd_mats, rev_mats, alignment) -> dict[str, float]:
    """AER of every readout × rule (and of each direction alone) over a split."""
    keep = [
        k
        for k, (a, b) in enumerate(zip(fwd_mats, rev_mats, strict=True))
        if a is not None and b is not None
    ]
    gold = [parse_pharaoh(alignment[k]) for k in keep]
    sure, possible = [s for s, _ in gold], [p for _, p in gold]
    per_pair = [readouts(fwd_mats[k], rev_mats[k]) for k in keep]
    out = {
        "forward": aer([r["argmax"][0] for r in per_pair], sure, possible),
        "reverse": aer([r["argmax"][1] for r in per_pair], sure, possible),
    }
    for name in per_pair[0]:
        for rule, combine in RULES.items():
            links = [combine(*r[name]) for r in per_pair]
            out[f"{name} {rule}"] = aer(links, sure, possible)
    return out


def matrices(pairs: dict[str, tuple[str, str]]) -> tuple[dict, dict]:
    """(name, split) → (forward matrices, reverse matrices, gold); and split →
    (source texts, target texts), of the first pair's corpus."""
    out, texts = {}, {}
    for name, (fwd_path, rev_path) in pairs.items():
        fwd = Translator.from_checkpoint(fwd_path, device="cpu")
        rev = Translator.from_checkpoint(rev_path, device="cpu")
        for split_name in SPLITS:
            split = encode_corpus_split(fwd.config.data, fwd.tokenizer, split_name)
            out[name, split_name] = (
                word_matrices(fwd, split),
                word_matrices(rev, swapped(split, rev)),
                split.alignment,
            )
            texts.setdefault(split_name, (split.src_text, split.tgt_text))
        texts.setdefault("data", fwd.config.data)
    return out, texts


def lexicon_aer(mats, texts, lexicons, setting) -> float:
    """AER of the two-way readout ``setting`` (weight, floor, add) over one split's
    (forward, reverse, gold) ``mats``."""
    weight, floor, add = setting
    fwd_mats, rev_mats, alignment = mats
    links, sure, possible = [], [], []
    for k, (a, b) in enumerate(zip(fwd_mats, rev_mats, strict=True)):
        if a is None or b is None:
            continue
        src, tgt = texts[0][k].split(), texts[1][k].split()
        a = weigh(a, lexicons[0].posterior(src, tgt), weight)
        b = weigh(b, lexicons[1].posterior(tgt, src), weight)
        links.append(geometric(a, b.T, floor, add))
        s, p = parse_pharaoh(alignment[k])
        sure.append(s)
        possible.append(p)
    return aer(links, sure, possible)


def lexicon_search(mats: dict, texts: dict, names: list[str]) -> None:
    """The ``--lexicon`` grid: each row's best setting on validation, and the one
    setting best on average, each scored on test."""
    train = read_corpus(texts["data"], links_for=()).splits["train"]
    lexicons = (
        train_lexicon(train["src"], train["tgt"]),
        train_lexicon(train["tgt"], train["src"]),
    )
    valid = {
        (name, setting): lexicon_aer(
            mats[name, "validation"], texts["validation"], lexicons, setting
        )
        for name in names
        for setting in LEXICON_GRID
    }
    row_best = {name: min(valid[name, x] for x in LEXICON_GRID) for name in names}
    common = min(  # the lowest mean ratio to each row's best
        LEXICON_GRID, key=lambda x: sum(valid[n, x] / row_best[n] for n in names)
    )

    def show(setting) -> str:
        weight, floor, add = setting
        return f"lexicon {weight}, floor {floor}, add {add}"

    print(f"\n--lexicon: the setting best on validation over all rows: {show(common)}")
    print(
        "| pair | plain geometric: valid / test | best setting on valid | "
        "valid / test | the common setting: valid / test |"
    )
    print("|---|---|---|---|---|")
    plain = (0.0, 0.0, None)
    for name in names:
        best = min(LEXICON_GRID, key=lambda x: valid[name, x])

        def test(setting, name=name) -> float:
            return lexicon_aer(mats[name, "test"], texts["test"], lexicons, setting)

        print(
            f"| {name} | {100 * valid[name, plain]:.2f}% / {100 * test(plain):.2f}% "
            f"| {show(best)} | {100 * valid[name, best]:.2f}% / "
            f"{100 * test(best):.2f}% | {100 * valid[name, common]:.2f}% / "
            f"{100 * test(common):.2f}% |"
        )


def mean_of(mats: list) -> list:
    """Pairwise mean of several models' matrices (None where any is None)."""
    return [
        None if any(m is None for m in ms) else np.mean(ms, axis=0)
        for ms in zip(*mats, strict=True)
    ]


def geometric_aer(mats: dict, names: list[str], split: str) -> float:
    """AER of ``symmetrize=geometric`` over the mean of the ``names`` pairs."""
    fwd = mean_of([mats[n, split][0] for n in names])
    rev = mean_of([mats[n, split][1] for n in names])
    alignment = mats[names[0], split][2]
    keep = [
        k
        for k, (a, b) in enumerate(zip(fwd, rev, strict=True))
        if a is not None and b is not None
    ]
    gold = [parse_pharaoh(alignment[k]) for k in keep]
    links = [geometric(fwd[k], rev[k].T) for k in keep]
    return aer(links, [s for s, _ in gold], [p for _, p in gold])


def subsets(mats: dict, names: list[str]) -> None:
    """Every non-empty subset's ``geometric`` AER on validation; the best on test."""
    scored = sorted(
        (geometric_aer(mats, list(sub), "validation"), sub)
        for r in range(1, len(names) + 1)
        for sub in itertools.combinations(names, r)
    )
    print(f"\n{len(scored)} subsets, geometric, validation AER (best five):")
    for value, sub in scored[:5]:
        print(f"  {100 * value:.2f}%  {' + '.join(sub)}")
    best = list(scored[0][1])
    print(
        f"best on validation, on test: {100 * geometric_aer(mats, best, 'test'):.2f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", nargs="+", help="NAME=FORWARD.pt,REVERSE.pt")
    parser.add_argument("--subsets", action="store_true", help="score every subset")
    parser.add_argument(
        "--lexicon", action="store_true", help="search the lexicon readout's grid"
    )
    args = parser.parse_args()
    pairs = {}
    for item in args.pairs:
        name, paths = item.split("=", 1)
        fwd, rev = paths.split(",")
        pairs[name] = (fwd, rev)
    mats, texts = matrices(pairs)
    if len(pairs) > 1:
        for split_name in SPLITS:
            chosen = [mats[name, split_name] for name in pairs]
            mats["mean of all", split_name] = (
                mean_of([c[0] for c in chosen]),
                mean_of([c[1] for c in chosen]),
                chosen[0][2],
            )
    print(
        "| attention | validation: best readout | its AER | test: argmax gdfa | "
        "test: that readout |"
    )
    print("|---|---|---|---|---|")
    for name in [*pairs, *(["mean of all"] if len(pairs) > 1 else [])]:
        valid = scores(*mats[name, "validation"])
        test = scores(*mats[name, "test"])
        best = min((k for k in valid if " " in k), key=valid.get)
        default = test["argmax grow-diag-final-and"]
        print(
            f"| {name} | {best} | {100 * valid[best]:.1f}% | "
            f"{100 * default:.1f}% | {100 * test[best]:.1f}% |"
        )
    if args.subsets:
        subsets(mats, list(pairs))
    if args.lexicon:
        lexicon_search(
            mats, texts, [*pairs, *(["mean of all"] if len(pairs) > 1 else [])]
        )


if __name__ == "__main__":
    main()
