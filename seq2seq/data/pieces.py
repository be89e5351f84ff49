"""Pieces → words, from the pieces alone: a piece starting with ``▁`` starts a word;
control pieces (``</s>``) are never words. The data layer's, so that decoding (a
knocked-out source word is its pieces) and alignment group pieces the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

WORD_START = "\u2581"  # SentencePiece's "▁": the piece starts a new word
_SPECIAL = re.compile(r"^<[^<>\s]+>$")  # </s>, <s>, <pad>, <unk>


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


def _word_text(text: str) -> str:
    stripped = text.replace(WORD_START, "")
    return stripped if stripped else WORD_START
