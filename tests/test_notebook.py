"""Attention maps in Jupyter: ``Translator.attention``'s result draws itself
(``_repr_html_``), and docs/notebooks/attention.ipynb runs headless (nbclient,
ipykernel) on the tiny test model, its outputs the viewer with the maps' tokens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from seq2seq.alignment.notebook import notebook_html, scoped_css

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs/notebooks/attention.ipynb"
DATA = re.compile(r'<script type="application/json" class="data">(.*?)</script>', re.S)
BLOCK = re.compile(r'<div id="(seq2seq-attention-[0-9a-f]+)"')


def records(html: str) -> list[dict]:
    (data,) = DATA.findall(html)
    return json.loads(data)


def test_scoped_css_puts_every_rule_under_the_block():
    css = "/* c */ body{margin:1em}\ntable.att td,#tip{color:red}"
    assert scoped_css(css, "#b") == "#b{margin:1em}\n#b table.att td,#b #tip{color:red}"


def test_attention_draws_itself_with_its_tokens_and_its_own_id(tiny_checkpoint):
    from seq2seq import Translator  # registers the notebook view

    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    maps = tr.attention(["the small blue chairs", "a red car"])
    first, second = maps._repr_html_(), notebook_html(maps)
    assert [r["src_tokens"] for r in records(first)] == [m.src_tokens for m in maps]
    assert "<script src" not in first and "<link" not in first  # all inline
    assert BLOCK.findall(first) != BLOCK.findall(second)  # two outputs, two ids


@pytest.mark.slow
def test_the_notebook_runs_headless_and_shows_the_viewer(
    tiny_checkpoint, monkeypatch, tmp_path
):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    from seq2seq.decoding.translator import Translator

    monkeypatch.setenv("SEQ2SEQ_NOTEBOOK_CHECKPOINT", str(tiny_checkpoint))
    monkeypatch.setenv("PYTHONPATH", str(NOTEBOOK.parents[2]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": tmp_path}},
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(views) == 2 and len({BLOCK.findall(v)[0] for v in views}) == 2
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    want = tr.attention(["the small blue chairs", "a red car"])
    assert [r["tgt_tokens"] for r in records(views[0])] == [m.tgt_tokens for m in want]
    forced = records(views[1])[0]
    assert forced["tgt_tokens"][:-1] == tr.tokenizer.tgt_pieces(
        tr.tokenizer.encode_tgt(["les petites chaises bleues"])[0]
    )
