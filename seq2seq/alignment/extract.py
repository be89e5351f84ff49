"""Attention maps of a model, for the alignment layer: ``attention_maps`` forces a
split through a ``Translator`` (``Translator.attention_maps``); the pieces it is made
of live in ``decoding/maps.py`` and are named here for their readers."""

from __future__ import annotations

from collections.abc import Sequence

from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.maps import EOS_PIECE, AttentionMap, forced_split, without_eos
from seq2seq.decoding.translator import Translator

__all__ = ["EOS_PIECE", "attention_maps", "forced_split", "without_eos"]


def attention_maps(
    translator: Translator,
    split: EncodedSplit,
    titles: Sequence[str] | None = None,
    with_gold: bool = False,
) -> list[AttentionMap]:
    """One ``AttentionMap`` per pair of ``split``, forced through ``split.tgt_ids``
    (``Translator.attention_maps``)."""
    return translator.attention_maps(split, titles, with_gold)
