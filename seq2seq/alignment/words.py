"""Pieces → words: the one place where SentencePiece pieces are grouped into
whitespace words, for AER, guided alignment, the exports, the heatmaps and the viewer.

The grouping itself (``group_pieces``, ``word_pieces``) is ``data/pieces.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from seq2seq.alignment.links import Link
from seq2seq.alignment.maps import AttentionMap, as_matrix, as_numpy
from seq2seq.data.pieces import (
    WORD_START,
    group_pieces,
    is_special,
    word_pieces,
)


def pair_pieces(
    tokenizer: Any, split: Any, k: int
) -> tuple[list[str], list[str]] | None:
    """Pair ``k`` of ``split`` as source and target pieces, or None when they do not
    regroup into its texts' words (``regroup``): what AER and the method comparisons
    read word by word."""
    src = tokenizer.src_pieces(list(split.src_ids[k]))
    tgt = tokenizer.tgt_pieces(list(split.tgt_ids[k]))
    if regroup(src, split.src_text[k]) is None:
        return None
    return None if regroup(tgt, split.tgt_text[k]) is None else (src, tgt)


def regroup(pieces: Sequence[str], text: str) -> list[list[int]] | None:
    """``word_pieces`` when they are the words of ``text`` (as many as its whitespace
    tokens), else None: gold links count those words, so an ``<unk>`` inside a word,
    say, leaves a pair that cannot be compared."""
    words = word_pieces(pieces)
    return words if len(words) == len(text.split()) else None


def word_groups(tokens: Sequence[str]) -> list[list[int]]:
    """Token indices of each whitespace word (specials excluded), whether ``tokens``
    are pieces (some start with ``▁``) or already words (a map after ``merged``)."""
    if any(t.startswith(WORD_START) for t in tokens):
        return word_pieces(tokens)
    return [[k] for k, t in enumerate(tokens) if not is_special(t)]


def word_matrix(
    weights: Any,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    shifted: bool = False,
) -> np.ndarray:
    """Piece-level attention as a ``(target words, source words)`` matrix.

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
    of its pieces' rows. The source EOS column is dropped, so a row sums to 1 minus
    what its word gave the end of the source.
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
        return np.zeros((len(tgt_words), len(src_words)))
    columns = np.stack([w[:, idx].sum(axis=1) for idx in src_words], axis=1)  # (T, Ws)
    rows = []
    for idx in tgt_words:
        steps = [min(t + 1, w.shape[0] - 1) for t in idx] if shifted else idx
        rows.append(columns[steps].mean(axis=0))
    return np.stack(rows)


def word_alignment_from_attention(
    weights: Any,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    shifted: bool = False,
) -> set[Link]:
    """Hard word alignment ``{(i, j)}``: each target word of ``word_matrix`` (same
    arguments) linked to its argmax source word."""
    return argmax_links(word_matrix(weights, src_pieces, tgt_pieces, shifted))


def argmax_links(matrix: np.ndarray) -> set[Link]:
    """``{(i, j)}``: each row ``j`` of a ``(target, source)`` word matrix linked to its
    argmax column ``i`` (the first on a tie)."""
    if not matrix.size:
        return set()
    return {(int(i), j) for j, i in enumerate(matrix.argmax(axis=1))}


def merge_subwords(
    weights: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> tuple[np.ndarray, list[str], list[str]]:
    """Merge SentencePiece pieces (``▁`` starts a word) into words.

    Source columns of one word are summed (so rows still sum to 1); target rows of one
    word are averaged. Specials such as ``</s>`` stay tokens of their own.
    Returns ``(weights (T_words, S_words), src_words, tgt_words)``.
    """
    w = as_matrix(weights, len(src_pieces), len(tgt_pieces))
    src_groups, tgt_groups = group_pieces(src_pieces), group_pieces(tgt_pieces)
    cols = np.stack([w[:, idx].sum(axis=1) for _, idx in src_groups], axis=1)
    rows = np.stack([cols[idx].mean(axis=0) for _, idx in tgt_groups], axis=0)
    return rows, [t for t, _ in src_groups], [t for t, _ in tgt_groups]


def merged(att: AttentionMap) -> AttentionMap:
    """The same map over words: pieces merged (``merge_subwords``) in the weights, the
    heads, the attribution and the self-attention and its attribution (source on both
    axes) alike."""

    def merge(matrix):
        return merge_subwords(matrix, att.src_tokens, att.tgt_tokens)[0]

    def merge_self(matrix):  # source on both axes
        return merge_subwords(matrix, att.src_tokens, att.src_tokens)[0]

    weights, src, tgt = merge_subwords(att.weights, att.src_tokens, att.tgt_tokens)
    heads = None if att.heads is None else np.stack([merge(h) for h in att.heads])
    attr = None if att.attribution is None else merge(att.attribution)

    def merge_layers(maps):  # (layers, heads, S, S) or None
        if maps is None:
            return None
        return np.stack([np.stack([merge_self(h) for h in lay]) for lay in maps])

    return replace(
        att,
        src_tokens=src,
        tgt_tokens=tgt,
        weights=weights,
        heads=heads,
        attribution=attr,
        self_attention=merge_layers(att.self_attention),
        self_attribution=merge_layers(att.self_attribution),
    )
