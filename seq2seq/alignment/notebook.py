"""Attention maps inline in a Jupyter notebook: ``Translator.attention``'s result
(``decoding.maps.AttentionMaps``) shows itself as the viewer, drawn by the viewer's
own code (``static/attention.js``), with nothing loaded from the network.

One output is one block: a container with its own id (so several outputs of one
notebook never share an element), the viewer's style scoped to that container (its
``body`` rule becomes the container's, so the notebook's own page keeps its look),
the drawing code and the maps' records. Importing this module registers
``notebook_html`` as the maps' ``_repr_html_`` (``decoding.maps.HTML_VIEW``).
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Sequence

from seq2seq.alignment.maps import CAVEAT, AttentionMap
from seq2seq.alignment.viewer import asset, script_json, view_record
from seq2seq.decoding.maps import HTML_VIEW


def scoped_css(css: str, scope: str) -> str:
    """``css`` (flat rules, no ``@`` blocks, as ``attention.css`` is) with every
    selector under ``scope``; ``body`` becomes ``scope`` itself."""
    out = []
    for rule in css.split("}"):
        if "{" not in rule:
            continue
        selectors, body = rule.split("{", 1)
        selectors = _without_comments(selectors)
        scoped = [
            scope if s.strip() == "body" else f"{scope} {s.strip()}"
            for s in selectors.split(",")
        ]
        out.append(f"{','.join(scoped)}{{{body}}}")
    return "\n".join(out)


def _without_comments(text: str) -> str:
    while "/*" in text:
        start = text.index("/*")
        end = text.find("*/", start)
        text = text[:start] + (text[end + 2 :] if end >= 0 else "")
    return text


def notebook_html(maps: Sequence[AttentionMap], title: str | None = None) -> str:
    """One self-contained block drawing ``maps`` (one section each, titled by its
    ``title`` or its translation); a fresh id per call."""
    uid = f"seq2seq-attention-{uuid.uuid4().hex[:12]}"
    records = []
    for k, item in enumerate(maps):
        record = view_record(item)
        record["title"] = (
            item.title
            or " ".join(t for t in item.tgt_tokens if t != "</s>")
            .replace("\u2581", " ")
            .strip()
            or f"Sentence {k + 1}"
        )
        records.append(record)
    heading = f"<h3>{html.escape(title)}</h3>" if title else ""
    return (
        f'<div id="{uid}" class="seq2seq-attention">'
        f"<style>{scoped_css(asset('attention.css'), '#' + uid)}</style>{heading}"
        f'<p class="caveat">{html.escape(CAVEAT)}</p><div class="maps"></div>'
        f'<script type="application/json" class="data">{script_json(records)}</script>'
        f"<script>{asset('scale.js')}</script>"
        f"<script>{asset('attention.js')}</script>"
        f"<script>(function(){{var box=document.getElementById({script_json(uid)});"
        "if(!document.getElementById('tip')){var tip=document.createElement('div');"
        "tip.id='tip';box.appendChild(tip);}"
        "AttentionView.tooltips();"
        "var recs=JSON.parse(box.querySelector('script.data').textContent);"
        "recs.forEach(function(rec,k){AttentionView.render("
        f"box.querySelector('.maps'),rec,{script_json(uid)}+'-'+k);}});"
        "box.setAttribute('data-ready','1');})();</script></div>"
    )


HTML_VIEW["html"] = notebook_html
