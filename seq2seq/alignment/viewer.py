"""The browser viewer: one self-contained HTML page (inline CSS and JS, no network).

Per sentence: a heatmap with hover values (weights that are exactly 0, as sparse
attention gives, hatched), a two-row view (source words above, target
words below, drawn as SVG) whose lines show the weights as thickness and opacity, a
head selector for multi-head attention (each head and the mean), gold links overlaid
when present, when given the gradient × input attribution beside the attention, and
the encoder's self-attention (a layer and head selector) when the model has it.
The page carries its records as JSON and draws itself with ``static/attention.js``,
the drawing code that ``seq2seq-serve``'s page loads too; it needs nothing but a
browser.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from seq2seq.alignment import scale as colour
from seq2seq.alignment.links import parse_pharaoh
from seq2seq.alignment.maps import CAVEAT, AttentionMap, as_matrix
from seq2seq.alignment.words import word_groups
from seq2seq.config import WeightScale

# The drawing code, shipped as package data (``static/``); seq2seq-serve serves it.
# scale.js is made from static/scale.json, the colour scale the PNGs use too.
ASSETS = ("attention.css", "scale.js", "attention.js")
# significant digits of the weights in the page's data (hover shows 3 decimals): a
# weight above 0 stays above 0, so the page marks the same support as the PNG
DIGITS = 6


def gold_cells(
    gold: Any, src_tokens: Sequence[str], tgt_tokens: Sequence[str]
) -> tuple[set, set]:
    """Gold word links (Pharaoh string or ``(i, j)`` pairs) as token cells.

    Returns ``(sure, possible)`` sets of ``(source token, target token)`` indices:
    every piece of a linked source word with every piece of the target word.
    """
    if gold is None:
        return set(), set()
    if isinstance(gold, str):
        sure, possible = parse_pharaoh(gold)
    else:
        sure = possible = {(int(i), int(j)) for i, j in gold}
    src, tgt = word_groups(src_tokens), word_groups(tgt_tokens)

    def cells(links):
        return {
            (s, t)
            for i, j in links
            if i < len(src) and j < len(tgt)
            for s in src[i]
            for t in tgt[j]
        }

    return cells(sure), cells(possible | sure)


def asset(name: str) -> str:
    """The text of one of the drawing code's files (``ASSETS``)."""
    if name not in ASSETS:
        raise ValueError(f"no asset {name!r}; the assets: {', '.join(ASSETS)}")
    if name == "scale.js":
        return colour.script()
    return (
        resources.files("seq2seq.alignment")
        .joinpath("static", name)
        .read_text(encoding="utf-8")
    )


def _rounded(value: Any) -> Any:
    """``value`` to ``DIGITS`` significant digits (their shortest JSON), as lists."""
    w = np.asarray(value, dtype=np.float64)
    digits = [float(f"{v:.{DIGITS}g}") for v in w.ravel().tolist()]
    return np.array(digits).reshape(w.shape).tolist()


def view_record(item: AttentionMap) -> dict[str, Any]:
    """One map as the record ``attention.js`` draws: ``AttentionMap.to_dict()``
    (checked against its tokens, rounded to ``DIGITS``) with the gold links as
    piece cells ``[i, j, "sure" | "possible"]``; the self-attention
    ``(layers, heads, S, S)`` when the map has it."""
    src = [str(t) for t in item.src_tokens]
    tgt = [str(t) for t in item.tgt_tokens]
    record = item.to_dict()
    record["weights"] = _rounded(as_matrix(item.weights, len(src), len(tgt)))
    if item.heads is not None:
        heads = np.asarray(item.heads, dtype=np.float64)
        for h in heads:
            as_matrix(h, len(src), len(tgt))
        record["heads"] = _rounded(heads)
    if item.attribution is not None:
        attribution = as_matrix(item.attribution, len(src), len(tgt))
        record["attribution"] = _rounded(attribution)
    record.update(self_attention_record(item, len(src)))
    sure, possible = gold_cells(item.gold, src, tgt)
    record["gold_cells"] = [[i, j, "sure"] for i, j in sorted(sure)] + [
        [i, j, "possible"] for i, j in sorted(possible - sure)
    ]
    return record


def self_attention_record(item: AttentionMap, n_src: int) -> dict[str, Any]:
    """``{"self_attention": (layers, heads, S, S)}`` when the map has the encoder's
    self-attention (over its source tokens on both axes), else ``{}``."""
    weights = getattr(item, "self_attention", None)
    if weights is None:
        return {}
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[2:] != (n_src, n_src):
        raise ValueError(
            f"self-attention of shape {tuple(w.shape)} does not match {n_src} source "
            f"tokens (want (layers, heads, S, S) with S = {n_src})"
        )
    return {"self_attention": _rounded(w)}


def script_json(value: Any) -> str:
    """JSON for a ``<script>`` element: ``<`` escaped, so no text ends it early."""
    return json.dumps(value).replace("<", "\\u003c")


def alignment_html(
    items: Sequence[AttentionMap],
    title: str = "Attention alignments",
    scale: WeightScale | str = "linear",
) -> str:
    """One self-contained HTML page (inline CSS, JS and data; no network).

    One section per map (``view_record``), drawn by ``static/attention.js``: its
    weights, its heads when present (a selector switches between each head and the
    mean), its gold links overlaid, its attribution beside it with the Spearman
    correlation, its encoder self-attention (layer and head selectors), under its
    title. Hovering a cell or a line shows ``source → target: weight`` in ``#tip``;
    hovering a target piece lights its source pieces. ``scale`` is the colour
    scale the page opens with; its switch changes it.
    """
    data = script_json([view_record(item) for item in items])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{asset('attention.css')}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="caveat">{html.escape(CAVEAT)} Rows are target tokens, columns '
        "source tokens; darker is more weight, white none. In the two-row view, "
        "thicker and darker lines carry more weight.</p>\n"
        '<div id="maps"></div><div id="tip"></div>'
        f'<script type="application/json" id="data">{data}</script>'
        f"<script>{asset('scale.js')}</script>"
        f"<script>{asset('attention.js')}</script>"
        f"<script>AttentionView.page({script_json(WeightScale(scale).value)});"
        "</script></body></html>\n"
    )
