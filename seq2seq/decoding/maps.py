"""Attention maps of a model: the record of one sentence's attention with its tokens,
and how forced decoding's matrices become them.

Force-decoding the model's own hypothesis reproduces the search's attention and also
gives the per-head weights of multi-head models; force-decoding a reference shows
where the model looks while reading the gold translation (what AER and the gold
overlay need: gold indices count the reference's words). ``Translator.attention``
is the one call (texts in, maps out); ``alignment/`` reads, scores and draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import EOS_ID, Tokenizer

EOS_PIECE = "</s>"


class ForcedAttention(NamedTuple):
    """The attention of one teacher-forced pair: weights ``(T + 1, S + 1)`` (target
    pieces plus the EOS step, source pieces plus the source EOS), heads ``(heads, T +
    1, S + 1)`` for multi-head attention, else None; self_heads ``(layers, heads, S +
    1, S + 1)``, the encoder's self-attention, for a model with blocks, else None."""

    weights: np.ndarray
    heads: np.ndarray | None
    self_heads: np.ndarray | None = None


@dataclass
class AttentionMap:
    """weights ``(T, S)``; heads ``(heads, T, S)`` for multi-head attention; gold links
    (Pharaoh over whitespace words) when known; attribution ``(T, S)`` (gradient ×
    input) and its Spearman correlation with the weights, when asked for;
    self_attention ``(layers, heads, S, S)``, the encoder's self-attention over
    ``src_tokens`` on both axes (rows: the querying source token, columns: the
    attended one), for a model with self-attention blocks; self_attribution, the
    same shape, each head's attention attribution (``alignment/attribution.py``),
    when asked for; attribution_method names the attribution's method;
    correlations, the Spearman ρ of each pair of maps computed (attention,
    gradient × input, occlusion), when more than one attribution was."""

    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    heads: np.ndarray | None = None
    gold: str | None = None
    attribution: np.ndarray | None = None
    spearman: float | None = None
    title: str = ""
    self_attention: np.ndarray | None = None
    self_attribution: np.ndarray | None = None
    attribution_method: str = "gradient × input"
    # the Spearman ρ of each pair of maps computed ("attention~occlusion", ...)
    correlations: dict[str, float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (lists, no NaN); optional parts only when present."""
        record: dict[str, Any] = {
            "title": self.title,
            "src_tokens": list(self.src_tokens),
            "tgt_tokens": list(self.tgt_tokens),
            "weights": np.asarray(self.weights).tolist(),
        }
        if self.heads is not None:
            record["heads"] = np.asarray(self.heads).tolist()
        if self.gold is not None:
            record["gold"] = self.gold
        if self.attribution is not None:
            record["attribution"] = np.asarray(self.attribution).tolist()
            rho = self.spearman
            record["spearman"] = None if rho is None or np.isnan(rho) else float(rho)
            record["attribution_method"] = self.attribution_method
        if self.self_attention is not None:
            record["self_attention"] = np.asarray(self.self_attention).tolist()
        if self.self_attribution is not None:
            record["self_attribution"] = np.asarray(self.self_attribution).tolist()
        if self.correlations is not None:
            record["correlations"] = dict(self.correlations)
        return record


class AttentionMaps(list):
    """A list of ``AttentionMap`` (what ``Translator.attention`` returns) that a
    Jupyter notebook shows as the interactive viewer (``_repr_html_``). The page is
    drawn by ``alignment/``, a later layer, so it registers itself here
    (``HTML_VIEW``) when imported: ``from seq2seq import Translator`` does so."""

    def _repr_html_(self) -> str | None:
        view = HTML_VIEW.get("html")
        return None if view is None else view(list(self))


# ``alignment.notebook`` puts its renderer here: maps -> a self-contained HTML block
HTML_VIEW: dict[str, Any] = {}


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


def piece_maps(
    tokenizer: Tokenizer,
    split: EncodedSplit,
    forced: Sequence[ForcedAttention],
    titles: Sequence[str] | None = None,
    with_gold: bool = False,
) -> list[AttentionMap]:
    """One ``AttentionMap`` per pair of ``split`` from its ``forced`` attention,
    with piece tokens (``</s>`` last on both sides); ``with_gold`` attaches the
    split's gold links (only meaningful when the targets are its references)."""
    maps = []
    for k, (att, src, tgt) in enumerate(
        zip(forced, split.src_ids, split.tgt_ids, strict=True)
    ):
        gold = split.alignment[k] if with_gold and split.alignment else None
        maps.append(
            AttentionMap(
                src_tokens=[*tokenizer.src_pieces(list(src)), EOS_PIECE],
                tgt_tokens=[*tokenizer.tgt_pieces(without_eos(tgt)), EOS_PIECE],
                weights=att.weights,
                heads=att.heads,
                gold=gold,
                self_attention=att.self_heads,
                title=titles[k] if titles is not None else "",
            )
        )
    return maps
