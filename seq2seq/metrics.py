"""Scoring: sacreBLEU BLEU/chrF with signatures, and the alignment error rate (AER).

``evaluate.py`` translates; this module only turns strings (or alignment links) into
numbers. Alignment links are ``(i, j)`` pairs with ``i`` a source word index and ``j`` a
target word index, the Pharaoh ``i-j`` convention, over whitespace words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

log = logging.getLogger(__name__)

WORD_START = "\u2581"  # SentencePiece's "▁": the piece starts a new word
_SPECIAL = re.compile(r"^<[^<>\s]+>$")  # </s>, <s>, <pad>, <unk>
_LINK = re.compile(r"^(\d+)([-?])(\d+)$")

Link = tuple[int, int]


@dataclass
class Scores:
    """Corpus scores with the sacreBLEU signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    lc_bleu: float | None = None
    n_sentences: int = 0
    lc_bleu_signature: str | None = None

    def summary(self) -> str:
        """One line: scores first, then the signatures."""
        line = f"BLEU {self.bleu:.2f} chrF {self.chrf:.2f}"
        if self.lc_bleu is not None:
            line += f" lcBLEU {self.lc_bleu:.2f}"
        line += f" (n={self.n_sentences}) | BLEU {self.bleu_signature}"
        line += f" | chrF {self.chrf_signature}"
        return line

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(hyps: Sequence[str], refs: Sequence[str], lowercase: bool = False) -> Scores:
    """Corpus BLEU and chrF (one reference per hypothesis) with sacreBLEU's defaults.

    ``lowercase=True`` additionally reports case-insensitive BLEU in ``lc_bleu`` (the
    cased BLEU stays the headline number).
    """
    hyps, refs = list(hyps), list(refs)
    if len(hyps) != len(refs):
        raise ValueError(
            f"got {len(hyps)} hypotheses but {len(refs)} references; "
            "they must pair up one to one"
        )
    if not hyps:
        raise ValueError("cannot score an empty corpus (0 hypotheses, 0 references)")
    bleu, chrf = BLEU(), CHRF()
    result = Scores(
        bleu=float(bleu.corpus_score(hyps, [refs]).score),
        chrf=float(chrf.corpus_score(hyps, [refs]).score),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        n_sentences=len(hyps),
    )
    if lowercase:
        lc = BLEU(lowercase=True)
        result.lc_bleu = float(lc.corpus_score(hyps, [refs]).score)
        result.lc_bleu_signature = str(lc.get_signature())
    return result


# --------------------------------------------------------------------------- AER


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


# ------------------------------------------------------------ pieces → words


def is_special(piece: str) -> bool:
    """True for control pieces such as ``</s>``, ``<s>``, ``<pad>``, ``<unk>``."""
    return bool(_SPECIAL.match(piece))


def group_pieces(pieces: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Group SentencePiece pieces into words: ``[(word, [piece indices]), ...]``.

    A piece starting with ``▁`` starts a word; others continue the previous word.
    A special piece (``</s>``) is a group of its own; the piece after it starts a word.
    """
    groups: list[tuple[str, list[int]]] = []
    open_word = False
    for k, piece in enumerate(pieces):
        if is_special(piece):
            groups.append((piece, [k]))
            open_word = False
        elif piece.startswith(WORD_START) or not open_word:
            groups.append((piece, [k]))
            open_word = True
        else:
            text, idx = groups[-1]
            groups[-1] = (text + piece, [*idx, k])
    return [(_word_text(text), idx) for text, idx in groups]


def word_pieces(pieces: Sequence[str]) -> list[list[int]]:
    """Piece indices of each whitespace word (control pieces are not words)."""
    return [idx for text, idx in group_pieces(pieces) if not is_special(text)]


def regroup(pieces: Sequence[str], text: str) -> list[list[int]] | None:
    """``word_pieces`` when they are the words of ``text`` (as many as its whitespace
    tokens), else None: gold links count those words, so an ``<unk>`` inside a word,
    say, leaves a pair that cannot be compared."""
    words = word_pieces(pieces)
    return words if len(words) == len(text.split()) else None


def _word_text(text: str) -> str:
    stripped = text.replace(WORD_START, "")
    return stripped if stripped else WORD_START


def word_alignment_from_attention(
    weights: Any,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    shifted: bool = False,
) -> set[Link]:
    """Hard word alignment ``{(i, j)}`` from piece-level attention.

    Args:
        weights: ``(T, S)`` attention over pieces; row ``t`` is the step that predicts
            target piece ``t``. It may carry one more row / column than there are pieces
            (the end-of-sentence step / source EOS); special pieces and that extra
            row / column never become words.
        src_pieces, tgt_pieces: SentencePiece pieces (``▁`` starts a word).
        shifted: use the step where the target piece is the decoder *input* (row
            ``t + 1``), i.e. the attention right after the word was emitted; the last
            piece falls back to the EOS row (or to the last row when there is none).

    A source word's weight is the sum over its pieces; a target word's row is the mean
    of its pieces' rows; each target word links to its argmax source word.
    """
    w = np.asarray(as_numpy(weights), dtype=np.float64)
    n_t, n_s = len(tgt_pieces), len(src_pieces)
    if (
        w.ndim != 2
        or w.shape[0] not in (n_t, n_t + 1)
        or w.shape[1] not in (n_s, n_s + 1)
    ):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not fit {n_t} target and {n_s} "
            "source pieces (one extra EOS row/column is allowed)"
        )
    src_words, tgt_words = word_pieces(src_pieces), word_pieces(tgt_pieces)
    if not src_words or not tgt_words:
        return set()
    columns = np.stack([w[:, idx].sum(axis=1) for idx in src_words], axis=1)  # (T, Ws)
    links: set[Link] = set()
    for j, idx in enumerate(tgt_words):
        rows = [min(t + 1, w.shape[0] - 1) for t in idx] if shifted else idx
        links.add((int(np.argmax(columns[rows].mean(axis=0))), j))
    return links


def as_numpy(weights: Any) -> np.ndarray:
    """A NumPy view of an array-like or a (possibly CUDA, bf16) torch tensor."""
    if hasattr(weights, "detach"):  # torch.Tensor, without importing torch here
        weights = weights.detach().double().cpu().numpy()
    return np.asarray(weights)


def as_matrix(weights: Any, n_src: int, n_tgt: int) -> np.ndarray:
    """``weights`` as a float64 ``(T, S)`` array, checked against the token counts."""
    w = np.asarray(as_numpy(weights), dtype=np.float64)
    if w.shape != (n_tgt, n_src):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not match {n_tgt} target and "
            f"{n_src} source tokens (want (T, S) = ({n_tgt}, {n_src}))"
        )
    return w
