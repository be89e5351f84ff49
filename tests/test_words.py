"""Pieces → words and word links: Pharaoh parsing, AER, readouts of attention."""

import numpy as np
import pytest
import torch

from seq2seq.alignment.links import aer, parse_pharaoh
from seq2seq.alignment.words import (
    group_pieces,
    regroup,
    word_alignment_from_attention,
)


def test_parse_pharaoh_sure_and_possible():
    sure, possible = parse_pharaoh("0-0 1?2  2-1")
    assert sure == {(0, 0), (2, 1)}
    assert possible == {(0, 0), (1, 2), (2, 1)}
    with pytest.raises(ValueError, match="1:2"):
        parse_pharaoh("0-0 1:2")


def test_aer_hand_computation():
    # sentence 1: A={00,11,22} S={00,11} P=S∪{21}; |A∩S|=2 |A∩P|=2
    # sentence 2: A={01} S={00} P=S∪{01};          |A∩S|=0 |A∩P|=1
    # AER = 1 - (2+0 + 2+1) / (3+1 + 2+1) = 1 - 5/7
    a = [{(0, 0), (1, 1), (2, 2)}, {(0, 1)}]
    s = [{(0, 0), (1, 1)}, {(0, 0)}]
    p = [{(2, 1)}, {(0, 1)}]  # possible given without the sure links: unioned inside
    assert aer(a, s, p) == pytest.approx(1 - 5 / 7)
    assert aer(s, s, s) == 0.0
    with pytest.raises(ValueError):
        aer(a, s, p[:1])


def test_group_pieces():
    pieces = ["▁Ein", "▁Fahr", "rad", ".", "</s>", "x"]
    assert group_pieces(pieces) == [
        ("Ein", [0]),
        ("Fahrrad.", [1, 2, 3]),
        ("</s>", [4]),
        ("x", [5]),
    ]


def test_word_alignment_from_attention_maps_pieces_to_words():
    src = ["▁the", "▁bi", "cycle", "</s>"]  # words: the, bicycle
    tgt = ["▁le", "▁vé", "lo", "</s>"]  # words: le, vélo
    w = np.array(
        [
            [0.6, 0.2, 0.1, 0.1],  # le   -> the (0.6 vs 0.3)
            [0.6, 0.2, 0.2, 0.0],  # vé   \ mean: the 0.4, bicycle 0.6
            [0.2, 0.4, 0.4, 0.0],  # lo   /
            [0.0, 0.1, 0.0, 0.9],  # </s> (EOS column and row never become words)
        ]
    )
    assert word_alignment_from_attention(w, src, tgt) == {(0, 0), (1, 1)}
    # shifted: le uses row 1 (the 0.6 vs bicycle 0.4),
    # vélo uses rows 2 and 3 (the EOS row): bicycle
    shifted = word_alignment_from_attention(torch.tensor(w), src, tgt, shifted=True)
    assert shifted == {(0, 0), (1, 1)}
    # pieces without EOS entries but weights with the extra EOS row and column
    assert word_alignment_from_attention(w, src[:3], tgt[:3]) == {(0, 0), (1, 1)}
    with pytest.raises(ValueError, match="do not fit"):
        word_alignment_from_attention(w[:2], src, tgt)


def test_shifted_uses_next_row():
    src, tgt = ["▁a", "▁b"], ["▁x", "▁y"]
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert word_alignment_from_attention(w, src, tgt) == {(0, 0), (1, 1)}
    # x takes row 1 (b); y has no next row and falls back to its own last row
    assert word_alignment_from_attention(w, src, tgt, shifted=True) == {(1, 0), (1, 1)}


def test_regroup_accepts_pieces_only_when_they_are_the_texts_words():
    pieces = ["\u2581le", "\u2581ch", "at", "</s>"]
    assert regroup(pieces, "le chat") == [[0], [1, 2]]
    assert regroup(pieces, "le chat noir") is None  # a word went missing
    # an <unk> is not a word: two words for three in the text
    assert regroup(["\u2581le", "<unk>", "\u2581noir"], "le chat noir") is None
