"""Write a deterministic synthetic parallel corpus with the shape of WMT14 en-de.

No WMT data is reachable offline, yet the data path has to be measured at its size:
this writes ``{train,validation,test}.jsonl`` with one ``{"en": ..., "de": ...}``
object per line, whose statistics follow a large news corpus's:

- word types drawn from a Zipf law (exponent 1.1) over ``--types`` types a language
  (200,000 by default), so a few types cover most tokens and a long tail stays rare;
- sentence lengths from a log-normal law, about 24 words on average (clipped to
  1–200), the target's length correlated with the source's (ratio ≈ 1.05, noisy);
- words of 2–12 letters built from syllables, with a few non-ASCII letters in German.

At the default settings 4.5M pairs make a 1.25 GB training file, like WMT14's. The
same ``--pairs`` and ``--seed`` give the same bytes, so figures taken on it repeat.

    python scripts/synthetic_corpus.py /tmp/wmt_synth --pairs 4500000
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SYLLABLES = {
    "en": [
        "ba",
        "be",
        "bi",
        "bo",
        "ca",
        "co",
        "de",
        "di",
        "do",
        "fa",
        "fe",
        "ga",
        "go",
        "ha",
        "he",
        "hi",
        "in",
        "is",
        "it",
        "la",
        "le",
        "li",
        "lo",
        "ma",
        "me",
        "mi",
        "mo",
        "na",
        "ne",
        "no",
        "on",
        "or",
        "pa",
        "pe",
        "pi",
        "po",
        "ra",
        "re",
        "ri",
        "ro",
        "sa",
        "se",
        "si",
        "so",
        "ta",
        "te",
        "ti",
        "to",
        "the",
        "un",
        "va",
        "ve",
        "wa",
        "we",
        "wi",
        "ya",
    ],
    "de": [
        "ab",
        "an",
        "au",
        "be",
        "bä",
        "da",
        "de",
        "di",
        "ei",
        "en",
        "er",
        "ge",
        "gü",
        "ha",
        "he",
        "hi",
        "ig",
        "in",
        "ka",
        "ke",
        "ko",
        "kö",
        "la",
        "le",
        "li",
        "ma",
        "me",
        "mi",
        "na",
        "ne",
        "nu",
        "ra",
        "re",
        "ri",
        "sa",
        "sch",
        "se",
        "si",
        "st",
        "ta",
        "te",
        "ti",
        "ung",
        "ve",
        "wa",
        "we",
        "wi",
        "za",
        "ze",
        "zu",
        "ß",
    ],
}
CHUNK = 100_000  # pairs generated and written at a time


def vocabulary(lang: str, types: int, rng: np.random.Generator) -> np.ndarray:
    """``types`` distinct words of 1–6 syllables; frequent ranks get short words."""
    syllables = np.array(SYLLABLES[lang])
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < types:
        n = min(6, 1 + int(rng.poisson(1.0 + 2.0 * len(words) / types)))
        word = "".join(syllables[rng.integers(0, len(syllables), n)])
        if word not in seen:
            seen.add(word)
            words.append(word)
    return np.array(words, dtype=object)


def zipf_cdf(types: int, exponent: float = 1.1) -> np.ndarray:
    weights = 1.0 / np.arange(1, types + 1) ** exponent
    return np.cumsum(weights) / weights.sum()


def sentences(
    words: np.ndarray, cdf: np.ndarray, lengths: np.ndarray, rng: np.random.Generator
) -> list[str]:
    ranks = np.searchsorted(cdf, rng.random(int(lengths.sum())))
    tokens = words[np.minimum(ranks, len(words) - 1)]
    ends = np.cumsum(lengths)
    out = [
        " ".join(tokens[end - n : end]) for n, end in zip(lengths, ends, strict=True)
    ]
    return [s[0].upper() + s[1:] + " ." for s in out]


def write_split(
    path: Path, pairs: int, seed: int, vocab: dict, cdfs: dict, mean_words: float
) -> int:
    """Write ``pairs`` lines to ``path``; returns the bytes written."""
    rng = np.random.default_rng([seed, pairs])
    sigma = 0.5
    mu = np.log(mean_words) - sigma**2 / 2
    size = 0
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, pairs, CHUNK):
            n = min(CHUNK, pairs - start)
            src_len = np.clip(rng.lognormal(mu, sigma, n).astype(int), 1, 200)
            ratio = rng.normal(1.05, 0.12, n)
            tgt_len = np.clip((src_len * ratio).round().astype(int), 1, 200)
            en = sentences(vocab["en"], cdfs["en"], src_len, rng)
            de = sentences(vocab["de"], cdfs["de"], tgt_len, rng)
            text = "".join(
                json.dumps({"en": e, "de": d}, ensure_ascii=False) + "\n"
                for e, d in zip(en, de, strict=True)
            )
            size += out.write(text)
    return size


@dataclass(frozen=True)
class Shape:
    """What the corpus looks like besides its size."""

    types: int = 200_000  # word types a language
    heldout: int = 3000  # pairs of validation and of test
    mean_words: float = 24.0  # words a sentence, on average


def write_corpus(
    folder: Path, pairs: int, seed: int = 0, shape: Shape = Shape()
) -> dict[str, int]:
    """Write the three splits under ``folder``; returns each file's size in bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = {lang: vocabulary(lang, shape.types, rng) for lang in ("en", "de")}
    cdfs = {lang: zipf_cdf(shape.types) for lang in vocab}
    sizes = {}
    held = shape.heldout
    for split, n in (("train", pairs), ("validation", held), ("test", held)):
        sizes[split] = write_split(
            folder / f"{split}.jsonl", n, seed + len(split), vocab, cdfs,
            shape.mean_words,
        )  # fmt: skip
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", type=int, default=200_000)
    parser.add_argument("--heldout", type=int, default=3000)
    args = parser.parse_args()
    shape = Shape(types=args.types, heldout=args.heldout)
    sizes = write_corpus(args.folder, args.pairs, args.seed, shape)
    for split, size in sizes.items():
        print(f"{args.folder / (split + '.jsonl')}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
