"""Which attention a picture shows: the decoder's cross-attention (target rows,
source columns) or the encoder's self-attention of one layer (source on both axes),
all heads or one.

A view is an ``AttentionMap`` again, so every renderer and export draws it unchanged:
a self-attention view's ``tgt_tokens`` are the source tokens (rows: the querying
token, columns: the attended one), its ``weights`` one head's matrix or the mean of
the heads, its ``heads`` each head's when no head is chosen.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from seq2seq.alignment.attribution import ATTENTION_ATTRIBUTION, spearman
from seq2seq.alignment.maps import AttentionMap


def self_view(att: AttentionMap, layer: int, head: int | None = None) -> AttentionMap:
    """Layer ``layer``'s self-attention of ``att`` (which must carry it): head
    ``head``'s ``(S, S)`` weights, or with ``head`` None the mean over heads as
    ``weights`` and every head's in ``heads``; beside its attribution (and their
    Spearman ρ) when ``att`` carries ``self_attribution``."""
    if att.self_attention is None:
        raise ValueError("this map has no self-attention (a model without blocks)")
    per_head = np.asarray(att.self_attention[layer])  # (heads, S, S)
    # the settings' spelling (counted from 0, as layer= and head= are); the panels
    # of all heads are numbered from 1, as everywhere else
    which = "all heads" if head is None else f"head={head}"
    weights = per_head.mean(axis=0) if head is None else per_head[head]
    attribution = rho = None
    if att.self_attribution is not None:  # beside the weights, as the cross view's
        heads_attr = np.asarray(att.self_attribution[layer])
        attribution = heads_attr.mean(axis=0) if head is None else heads_attr[head]
        rho = spearman(weights, attribution)
    return AttentionMap(
        src_tokens=list(att.src_tokens),
        tgt_tokens=list(att.src_tokens),
        weights=weights,
        heads=per_head if head is None and attribution is None else None,
        attribution=attribution,
        spearman=rho,
        attribution_method=ATTENTION_ATTRIBUTION,
        title=f"{att.title} · self-attention layer={layer} {which}".lstrip(" ·"),
    )


def cross_view(att: AttentionMap, head: int | None = None) -> AttentionMap:
    """The cross-attention, or one head of a multi-head cross-attention."""
    if head is None:
        return att
    if att.heads is None:
        raise ValueError("this map has no heads (not a multi-head attention)")
    return replace(
        att,
        weights=np.asarray(att.heads)[head],
        heads=None,
        attribution=None,
        spearman=None,
        title=f"{att.title} · cross-attention head={head}".lstrip(" ·"),
    )
