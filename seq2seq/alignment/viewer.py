"""The browser viewer: one self-contained HTML page (inline CSS and JS, no network).

Per sentence: a heatmap with hover values (weights that are exactly 0, as sparse
attention gives, hatched), a two-row view (source words above, target
words below, drawn as SVG) whose lines show the weights as thickness and opacity, a
head selector for multi-head attention (each head and the mean), gold links overlaid
when present, and, when given, the gradient × input attribution beside the attention.
The page carries its data as JSON and draws itself; it needs nothing but a browser.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from seq2seq.alignment.links import parse_pharaoh
from seq2seq.alignment.maps import (
    CAVEAT,
    AttentionMap,
    as_matrix,
    as_numpy,
    zero_share,
)
from seq2seq.alignment.words import word_groups

_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}
section{border-top:1px solid #ccc;padding-top:0.5em;margin-bottom:1.5em}
.views{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}
.views h3{font-size:0.95em;margin:0.3em 0}
table.att{border-collapse:collapse;margin:0.5em 0}
table.att td{width:1.6em;height:1.6em;border:1px solid #eee;padding:0}
table.att th{font-weight:normal;font-size:0.85em;padding:2px 4px}
table.att th.src{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left}
table.att th.tgt{text-align:right}
td.zero{background:repeating-linear-gradient(45deg,#fff 0 3px,#ddd 3px 4px)!important}
td.sure{outline:2px solid #d33;outline-offset:-3px}
td.possible{outline:2px dashed #d93;outline-offset:-3px}
svg.two text{font-size:13px}
svg.two line.w{stroke:#08306b}
svg.two line.sure{stroke:#d33;stroke-width:1.5;stroke-dasharray:6 3}
svg.two line.possible{stroke:#d93;stroke-width:1;stroke-dasharray:2 3}
.caveat{background:#fff8e0;border-left:4px solid #e0b000;padding:0.5em 1em}
.note{color:#555;font-size:0.9em}
#tip{position:fixed;display:none;background:#333;color:#fff;padding:3px 6px;
border-radius:3px;font-size:0.85em;pointer-events:none}"""

_JS = r"""(function(){
var DATA=JSON.parse(document.getElementById('data').textContent);
var tip=document.getElementById('tip');
function esc(s){return String(s).replace(/[&<>"]/g,function(c){
return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function at(n,v){return ' '+n+'="'+esc(v)+'"';}
function two(d,m){var L=d.src.concat(d.tgt).map(function(s){return s.length;});
var step=Math.max(64,8*Math.max.apply(null,L)),n=Math.max(d.src.length,d.tgt.length);
var w=n*step+20,H=150,ys=26,yt=H-24,y1=ys+6,y2=yt-16;
function xs(i){return 10+step*(i+0.5)+(n-d.src.length)*step/2;}
function xt(j){return 10+step*(j+0.5)+(n-d.tgt.length)*step/2;}
function line(c,i,j,extra){return '<line'+at('class',c)+at('x1',xs(i))+at('y1',y1)+
at('x2',xt(j))+at('y2',y2)+extra+'></line>';}
var h='<svg'+at('class','two')+at('width',w)+at('height',H)+'>';
d.tgt.forEach(function(t,j){d.src.forEach(function(s,i){var v=m[j][i];
if(v<0.02)return;h+=line('w',i,j,at('stroke-width',(0.5+5*v).toFixed(2))+
at('stroke-opacity',v.toFixed(3))+
at('data-tip',s+' \u2192 '+t+': '+v.toFixed(3)));});});
d.gold.forEach(function(g){h+=line(g[2],g[0],g[1],at('data-tip','gold '+g[2]+': '+
d.src[g[0]]+' \u2192 '+d.tgt[g[1]]));});
d.src.forEach(function(s,i){h+='<text'+at('x',xs(i))+at('y',ys)+
' text-anchor="middle">'+esc(s)+'</text>';});
d.tgt.forEach(function(t,j){h+='<text'+at('x',xt(j))+at('y',yt)+
' text-anchor="middle">'+esc(t)+'</text>';});return h+'</svg>';}
function show(sec,d){var sel=sec.querySelector('select.head');
var key=sel?sel.value:d.keys[0];
sec.querySelectorAll('.heat').forEach(function(el){
el.hidden=el.getAttribute('data-key')!==key;});
sec.querySelector('.two-row').innerHTML=two(d,d.mats[key]);}
DATA.forEach(function(d,k){var sec=document.getElementById('sentence-'+k);
show(sec,d);var sel=sec.querySelector('select.head');
if(sel){sel.addEventListener('change',function(){show(sec,d);});}});
document.addEventListener('mousemove',function(e){var el=e.target.closest?
e.target.closest('[data-tip]'):null;if(!el){tip.style.display='none';return;}
tip.textContent=el.getAttribute('data-tip');tip.style.display='block';
tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';});
document.body.setAttribute('data-ready','1');})();"""


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


def _rounded(m: np.ndarray) -> list[list[float]]:
    return np.round(m, 4).tolist()


def _table(w: np.ndarray, src, tgt, sure=(), possible=()) -> str:
    esc = html.escape
    head = "".join(f'<th class="src">{esc(s)}</th>' for s in src)
    rows = [f"<tr><th></th>{head}</tr>"]
    for j, (tok, row) in enumerate(zip(tgt, w, strict=True)):
        cells = []
        for i, value in enumerate(row):
            shown = "exactly 0" if value == 0 else f"{value:.3f}"
            tip = esc(f"{src[i]} → {tok}: {shown}")
            cls = (
                " sure" if (i, j) in sure else " possible" if (i, j) in possible else ""
            )
            cls += " zero" if value == 0 else ""
            cells.append(
                f'<td class="cell{cls}" style="background:{_color(value)}" '
                f'data-tip="{tip}"></td>'
            )
        rows.append(f'<tr><th class="tgt">{esc(tok)}</th>{"".join(cells)}</tr>')
    return '<table class="att">' + "".join(rows) + "</table>"


def _color(value: float) -> str:
    """White (0) to dark blue (1)."""
    v = float(np.clip(value, 0.0, 1.0))
    r, g, b = (round(255 + (c - 255) * v) for c in (8, 48, 107))
    return f"#{r:02x}{g:02x}{b:02x}"


def _matrices(item: AttentionMap, n_src: int, n_tgt: int) -> dict[str, np.ndarray]:
    """The selectable matrices: the attention, or each head and their mean."""
    w = as_matrix(item.weights, n_src, n_tgt)
    if item.heads is None:
        return {"attention": w}
    heads = np.asarray(as_numpy(item.heads), dtype=np.float64)
    mats = {"mean": w}
    for h, hw in enumerate(heads):
        mats[f"head {h + 1}"] = as_matrix(hw, n_src, n_tgt)
    return mats


def _section(k: int, item: AttentionMap) -> tuple[str, dict]:
    """One sentence's HTML (tables rendered here) and its data for the script."""
    src = [str(t) for t in item.src_tokens]
    tgt = [str(t) for t in item.tgt_tokens]
    mats = _matrices(item, len(src), len(tgt))
    sure, possible = gold_cells(item.gold, src, tgt)
    esc = html.escape
    title = esc(item.title or f"Sentence {k + 1}")
    parts = [f'<section id="sentence-{k}"><h2>{title}</h2>']
    if len(mats) > 1:
        options = "".join(f'<option value="{esc(n)}">{esc(n)}</option>' for n in mats)
        parts.append(f'<label>show <select class="head">{options}</select></label>')
    parts.append('<div class="views"><div><h3>attention</h3>')
    for n, (key, m) in enumerate(mats.items()):
        hidden = " hidden" if n else ""
        table = _table(m, src, tgt, sure, possible - sure)
        parts.append(f'<div class="heat" data-key="{esc(key)}"{hidden}>{table}</div>')
    parts.append("</div>")
    if item.attribution is not None:
        attr = as_matrix(item.attribution, len(src), len(tgt))
        parts.append("<div><h3>attribution (gradient × input)</h3>")
        parts.append(f'<div class="attr">{_table(attr, src, tgt)}</div>')
        rho = item.spearman
        if rho is not None and not math.isnan(rho):
            parts.append(
                f'<p class="note">Spearman ρ(attention, attribution) = {rho:.3f}</p>'
            )
        parts.append("</div>")
    parts.append('</div><div class="two-row"></div>')
    zeros = zero_share([m for key, m in mats.items() if key != "mean"])
    if zeros:
        parts.append(
            f'<p class="note">{100 * zeros:.0f}% of the weights are exactly 0 '
            "(hatched cells, no line): the attention is sparse.</p>"
        )
    if item.gold is not None:
        parts.append(
            '<p class="note">Gold links: red (outline; dashed line) sure, orange '
            "possible.</p>"
        )
    parts.append("</section>")
    gold = [[i, j, "sure"] for i, j in sorted(sure)]
    gold += [[i, j, "possible"] for i, j in sorted(possible - sure)]
    data = {"src": src, "tgt": tgt, "keys": list(mats), "gold": gold}
    data["mats"] = {key: _rounded(m) for key, m in mats.items()}
    return "\n".join(parts), data


def alignment_html(
    items: Sequence[AttentionMap], title: str = "Attention alignments"
) -> str:
    """One self-contained HTML page (inline CSS, JS and data; no network).

    One section per map: its weights, its heads when present (a selector switches
    between each head and the mean), its gold links overlaid, its attribution beside
    it with the Spearman correlation, under its title. Hovering a cell or a line
    shows ``source → target: weight`` in ``#tip``.
    """
    sections = [_section(k, item) for k, item in enumerate(items)]
    data = json.dumps([d for _, d in sections])
    data = data.replace("<", "\\u003c")  # never end the script element early
    body = "\n".join(h for h, _ in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="caveat">{html.escape(CAVEAT)} Rows are target tokens, columns '
        "source tokens; darker is more weight. In the two-row view, thicker and "
        "darker lines carry more weight.</p>\n"
        f'{body}\n<div id="tip"></div>'
        f'<script type="application/json" id="data">{data}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )
