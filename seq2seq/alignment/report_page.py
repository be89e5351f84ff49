"""The corpus report as one self-contained HTML page: a sortable, filterable table of
a split's sentences and, on a click, the sentence's views drawn by the viewer's own
drawing code (``static/attention.js``; the table is ``static/report.js``).

To keep a whole split small and quick to open, each matrix travels as base64 of
little-endian float16 (``packed``: about 3 significant digits, what the hover's 3
decimals show; a weight above 0 stays above 0, so the page marks the same support
as the PNGs), decoded only when its sentence is opened; the numbers of the table
are rounded.
"""

from __future__ import annotations

import base64
import html
from typing import Any

import numpy as np

from seq2seq.alignment.maps import CAVEAT, AttentionMap, as_matrix
from seq2seq.alignment.report import CorpusReport, SentenceRow
from seq2seq.alignment.viewer import asset, gold_cells, script_json

REPORT_ASSETS = ("report.css", "report.js")
# the smallest float16 above 0 (a subnormal): positive weights are kept at least this
TINY = float(np.finfo(np.float16).smallest_subnormal)
COLUMNS = (  # key, header, digits
    ("bleu", "BLEU", 1),
    ("chrf", "chrF", 1),
    ("entropy", "entropy", 3),
    ("coverage", "coverage dev.", 3),
    ("outliers", "coverage outliers", 0),
    ("disagreement", "disagreement", 3),
    ("spearman", "Spearman ρ", 3),
    ("aer", "AER", 3),
)


def packed(matrix: Any) -> dict[str, Any]:
    """An array as ``{"shape": [...], "f16": base64}``: float16, little-endian; a
    value above 0 at least ``TINY``."""
    a = np.asarray(matrix, dtype=np.float64)
    a = np.where((a > 0) & (a < TINY), TINY, a)
    data = a.astype("<f2").tobytes()
    return {"shape": list(a.shape), "f16": base64.b64encode(data).decode("ascii")}


def map_record(item: AttentionMap) -> dict[str, Any]:
    """One map as ``report.js`` unpacks it into ``attention.js``'s record: tokens,
    title, packed weights (heads, attribution, self-attention when present), the
    Spearman ρ and the gold links as piece cells."""
    src, tgt = [str(t) for t in item.src_tokens], [str(t) for t in item.tgt_tokens]
    rec: dict[str, Any] = {"title": item.title, "src_tokens": src, "tgt_tokens": tgt}
    rec["weights"] = packed(as_matrix(item.weights, len(src), len(tgt)))
    if item.heads is not None:
        rec["heads"] = packed(item.heads)
    if item.attribution is not None:
        rec["attribution"] = packed(as_matrix(item.attribution, len(src), len(tgt)))
        rho = item.spearman
        rec["spearman"] = None if rho is None or np.isnan(rho) else round(rho, 4)
        rec["attribution_method"] = item.attribution_method
    if item.self_attention is not None:
        rec["self_attention"] = packed(item.self_attention)
    sure, possible = gold_cells(item.gold, src, tgt)
    rec["gold_cells"] = [[i, j, "sure"] for i, j in sorted(sure)] + [
        [i, j, "possible"] for i, j in sorted(possible - sure)
    ]
    return rec


def row_record(row: SentenceRow) -> dict[str, Any]:
    """A table row: the texts and each ``COLUMNS`` number rounded (None: no value)."""
    rec: dict[str, Any] = {"i": row.index, "src": row.src, "hyp": row.hyp}
    rec["ref"] = row.ref
    for key, _, digits in COLUMNS:
        value = getattr(row, key)
        rec[key] = None if value is None else round(float(value), digits or None)
    return rec


def _means(report: CorpusReport) -> dict[str, float | None]:
    out = {}
    for key, _, _ in COLUMNS:
        values = [getattr(r, key) for r in report.rows]
        values = [v for v in values if v is not None]
        out[key] = round(float(np.mean(values)), 3) if values else None
    return out


def report_html(report: CorpusReport, title: str | None = None) -> str:
    """The page: the table (``row_record`` per sentence, ``COLUMNS``), each
    sentence's maps (``map_record``; its reference's too where gold links exist),
    the drawing code and the report's script and style inlined."""
    title = title or f"Corpus report: {report.split} ({len(report.rows)} sentences)"
    refs = report.reference_maps or [None] * len(report.maps)
    maps = [
        [map_record(m)] + ([] if ref is None else [map_record(ref)])
        for m, ref in zip(report.maps, refs, strict=True)
    ]
    table = {
        "rows": [row_record(r) for r in report.rows],
        "columns": [{"key": k, "label": lab, "digits": d} for k, lab, d in COLUMNS],
        "means": _means(report),
        "method": report.method,
    }
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{asset('attention.css')}{report_asset('report.css')}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>"
        f'<p class="caveat">{html.escape(CAVEAT)} Definitions of the columns: '
        "docs/corpus_report.md.</p>\n"
        '<div id="detail"></div><div id="report"></div><div id="tip"></div>'
        f'<script type="application/json" id="table">{script_json(table)}</script>'
        f'<script type="application/json" id="maps-data">{script_json(maps)}</script>'
        f"<script>{asset('scale.js')}</script>"
        f"<script>{asset('attention.js')}</script>"
        f"<script>{report_asset('report.js')}</script>"
        "</body></html>\n"
    )


def report_asset(name: str) -> str:
    """The text of the report's own script or style (``REPORT_ASSETS``)."""
    from importlib import resources

    if name not in REPORT_ASSETS:
        raise ValueError(f"no asset {name!r}; the report's: {', '.join(REPORT_ASSETS)}")
    files = resources.files("seq2seq.alignment").joinpath("static", name)
    return files.read_text(encoding="utf-8")


def report_tsv(report: CorpusReport) -> str:
    """The table as tab-separated text: the index, each ``COLUMNS`` number (empty:
    no value), source, translation, reference (tabs and newlines as spaces)."""
    keys = [k for k, _, _ in COLUMNS]
    lines = ["\t".join(["index", *keys, "source", "translation", "reference"])]
    for row in report.rows:
        numbers = [
            "" if getattr(row, k) is None else f"{getattr(row, k):.4g}" for k in keys
        ]
        texts = [" ".join(t.split()) for t in (row.src, row.hyp, row.ref)]
        lines.append("\t".join([str(row.index), *numbers, *texts]))
    return "\n".join(lines) + "\n"
