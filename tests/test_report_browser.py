"""The corpus report (seq2seq-align report=DIR) in a real headless Chromium
(Playwright), opened from a file:// URL: sorted by a header, filtered by text and by
a bound, a sentence opened by keyboard with its views drawn by attention.js; and two
notebook views in one page.

The page is the tiny test model's phrasebook test split (gold links: AER and the
reference's view), or ``$SEQ2SEQ_REPORT_PAGE`` (a report.html made by the command,
the Multi30k validation split's, say). The page's open time is printed, never
asserted; ``$SEQ2SEQ_REPORT_SCREENSHOT=PATH`` saves a screenshot of an opened
sentence.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.test_serve_browser import chromium  # noqa: F401 (the browser fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def report_page(request, tmp_path) -> Path:
    given = os.environ.get("SEQ2SEQ_REPORT_PAGE")
    if given:
        return Path(given)
    from seq2seq.alignment.pipeline import run_align
    from seq2seq.cli.align import check_align
    from seq2seq.config import AlignConfig
    from seq2seq.decoding.translator import Translator

    ckpt = request.getfixturevalue("tiny_checkpoint")
    cfg = OmegaConf.structured(
        AlignConfig(
            checkpoint=str(ckpt),
            split="test",
            index=list(range(30)),
            report=str(tmp_path / "report"),
        )
    )
    check_align(cfg)
    tr = Translator.from_checkpoint(ckpt, device="cpu")
    return run_align(cfg, tmp_path, tr, None)


def _column(page, key: str) -> list[float]:
    """The visible rows' values of column ``key``, in the table's order."""
    index = page.evaluate(
        "k => Array.from(document.querySelectorAll("
        "'table.report thead tr:first-child th'))"
        ".findIndex(th => { const b = th.querySelector('button');"
        " return b && b.getAttribute('data-key') === k; })",
        key,
    )
    texts = page.evaluate(
        "i => Array.from(document.querySelectorAll('table.report tbody tr'))"
        ".filter(tr => !tr.hidden).map(tr => tr.children[i].textContent)",
        index,
    )
    return [float(t) for t in texts if t != "\u2013"]


def test_report_sorts_filters_and_opens_a_sentence(chromium, report_page):  # noqa: F811
    page = chromium.new_page(viewport={"width": 1300, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(report_page.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    ready = page.evaluate("window.reportReadyMs")
    load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    size = report_page.stat().st_size / 1e6
    print(
        f"\nreport {report_page} ({size:.2f} MB): table ready {ready:.0f} ms, "
        f"load event {load:.0f} ms after navigation start"
    )
    n = page.locator("table.report tbody tr").count()
    assert n > 0 and page.inner_text("#shown") == f"showing {n} of {n}"

    # sort by chrF: a click ascending, Enter on the focused header descending
    page.click("thead button[data-key='chrf']")
    up = _column(page, "chrf")
    assert up == sorted(up) and len(up) == n
    page.focus("thead button[data-key='chrf']")
    page.keyboard.press("Enter")
    assert _column(page, "chrf") == sorted(up, reverse=True)
    sort = page.get_attribute("th:has(button[data-key='chrf'])", "aria-sort")
    assert sort == "descending"

    # a text filter: every row shown holds the word, and fewer rows show
    first = page.inner_text("table.report tbody tr:first-child div.src").split()[0]
    page.fill("#text-filter", first)
    shown = page.locator("table.report tbody tr:not([hidden])")
    assert 0 < shown.count() <= n
    for k in range(shown.count()):
        assert first.lower() in shown.nth(k).inner_text().lower()
    page.fill("#text-filter", "")
    # a bound: chrF at least the median
    median = sorted(up)[len(up) // 2]
    page.fill("input.min[data-key='chrf']", str(median))
    kept = _column(page, "chrf")
    assert kept and min(kept) >= median and len(kept) <= n
    page.fill("input.min[data-key='chrf']", "")

    # open the first row by keyboard: its views, drawn by attention.js
    page.focus("table.report tbody tr:not([hidden]) button.open")
    page.keyboard.press("Enter")
    page.wait_for_selector("#maps section")
    section = page.locator("#maps section").first
    cols = section.locator(".heat th.src").count()
    rows = section.locator(".heat th.tgt").count()
    assert cols > 1 and rows > 1
    assert section.locator(".heat td").count() == cols * rows
    assert section.locator(".attr td").count() == cols * rows  # occlusion beside it
    assert "occlusion" in section.inner_text()
    assert section.locator("svg.two line.w").count() > 0
    if page.locator("thead button[data-key='aer']").count():  # gold: the reference
        assert page.locator("#maps section").count() == 2
        assert page.locator("#maps section").nth(1).locator("td.sure").count() > 0
    cell = section.locator(".heat tr:nth-child(2) td").first
    cell.hover()
    assert " \u2192 " in page.inner_text("#tip")
    shot = os.environ.get("SEQ2SEQ_REPORT_SCREENSHOT")
    if shot:
        page.mouse.move(5, 5)
        page.evaluate("window.scrollTo(0, 0)")
        clip = {
            "x": 0,
            "y": 0,
            "width": 1300,
            "height": 1800,
        }  # the sentence, the table
        page.screenshot(path=shot, full_page=True, clip=clip)
    assert errors == []


def test_two_notebook_views_in_one_page_draw_apart(chromium, tmp_path):  # noqa: F811
    import numpy as np

    from seq2seq.alignment.maps import AttentionMap
    from seq2seq.alignment.notebook import notebook_html

    src, tgt = ["▁le", "▁chat", "</s>"], ["▁the", "▁cat", "</s>"]
    one = [AttentionMap(src, tgt, np.eye(3) * 0.8 + 0.2 / 3)]
    two = [AttentionMap(src, tgt, np.full((3, 3), 1 / 3), title="uniform")]
    path = tmp_path / "nb.html"
    body = f"<p>cell 1</p>{notebook_html(one)}<p>cell 2</p>{notebook_html(two)}"
    path.write_text(f"<!DOCTYPE html><html><body>{body}</body></html>", "utf-8")
    page = chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector(".seq2seq-attention[data-ready='1'] >> nth=1")
    ids = page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids))  # no id twice, one #tip
    blocks = page.locator(".seq2seq-attention")
    assert blocks.nth(0).locator(".heat td").count() == 9
    assert blocks.nth(1).locator("h2").inner_text() == "uniform"
    blocks.nth(1).locator(".heat tr:nth-child(2) td").first.hover()
    assert page.inner_text("#tip") == "▁le → ▁the: 0.333"
    margin = page.evaluate("getComputedStyle(document.body).marginTop")
    assert margin == "8px"  # the page's own style, untouched by the viewer's
    assert errors == []
