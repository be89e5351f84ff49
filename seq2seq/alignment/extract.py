"""Attention maps of a model: force-decode pairs in batches, attach their tokens.

Force-decoding the model's own hypothesis reproduces the search's attention and also
gives the per-head weights of multi-head models; force-decoding a reference shows
where the model looks while reading the gold translation (what AER and the gold
overlay need: gold indices count the reference's words).
"""

from __future__ import annotations

from collections.abc import Sequence

from seq2seq.alignment.maps import AttentionMap
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import EOS_ID
from seq2seq.decoding.translator import Translator

EOS_PIECE = "</s>"


def without_eos(tokens: Sequence[int]) -> list[int]:
    """A hypothesis's tokens without their final EOS (the forced target)."""
    tokens = list(tokens)
    return tokens[:-1] if tokens and tokens[-1] == EOS_ID else tokens


def forced_split(split: EncodedSplit, targets: Sequence[Sequence[int]]) -> EncodedSplit:
    """``split`` with its targets replaced by ``targets`` (hypotheses, say)."""
    return EncodedSplit(
        src_text=split.src_text,
        tgt_text=[""] * len(targets),
        src_ids=split.src_ids,
        tgt_ids=[without_eos(t) for t in targets],
    )


def attention_maps(
    translator: Translator,
    split: EncodedSplit,
    titles: Sequence[str] | None = None,
    with_gold: bool = False,
) -> list[AttentionMap]:
    """One ``AttentionMap`` per pair of ``split``, forced through ``split.tgt_ids``,
    with piece tokens (``</s>`` last on both sides); ``with_gold`` attaches the
    split's gold links (only meaningful when the targets are its references)."""
    forced = translator.forced_attention(split)
    tok = translator.tokenizer
    maps = []
    for k, (att, src, tgt) in enumerate(
        zip(forced, split.src_ids, split.tgt_ids, strict=True)
    ):
        gold = split.alignment[k] if with_gold and split.alignment else None
        maps.append(
            AttentionMap(
                src_tokens=[*tok.src_pieces(list(src)), EOS_PIECE],
                tgt_tokens=[*tok.tgt_pieces(without_eos(tgt)), EOS_PIECE],
                weights=att.weights,
                heads=att.heads,
                gold=gold,
                title=titles[k] if titles is not None else "",
            )
        )
    return maps
