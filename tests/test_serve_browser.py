"""seq2seq-serve's page in a real headless Chromium (Playwright driving the system's
Chromium; no browser download): type a sentence, see its translation and heatmap,
hover a target piece and see its sources lit with their weights, force a reference.

Skips when Chromium or Playwright is missing, except with
``SEQ2SEQ_REQUIRE_BROWSER=1`` (CI), where that is a failure. The time from the last
keystroke to the drawn heatmap is printed (the issue's target: 300 ms on the
quickstart model), not asserted. ``SEQ2SEQ_SERVE_SCREENSHOT=PATH`` also saves the
page's screenshot there (docs/serve_page.png).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from seq2seq.alignment import scale
from tests.test_serve_process import start_server
from tests.test_viewer_browser import _unavailable, chromium_binary

pytestmark = pytest.mark.slow

SENTENCE = "Tom cooks this egg ."
REFERENCE = "Tom prépare cet œuf ."


def cell_colors(page, selector: str) -> list:
    """The computed background colour of each cell of a heatmap, ``(T, S, 3)``."""
    css = page.locator(f"{selector} tr").evaluate_all(
        "rows => rows.slice(1).map(tr => Array.from(tr.querySelectorAll('td'))"
        ".map(td => getComputedStyle(td).backgroundColor))"
    )
    return [[[int(x) for x in c[4:-1].split(",")] for c in row] for row in css]


def _post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


@pytest.fixture
def chromium():
    binary = chromium_binary()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=binary,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def server(request, tmp_path):
    """The server on a free port: ``$SEQ2SEQ_SERVE_CHECKPOINT`` (the quickstart's,
    say, for the timing) or the tiny test checkpoint."""
    checkpoint = os.environ.get("SEQ2SEQ_SERVE_CHECKPOINT")
    if checkpoint is None:
        checkpoint = request.getfixturevalue("tiny_checkpoint")
    proc, port, _ = start_server(Path(checkpoint), tmp_path / "run")
    yield port
    proc.terminate()
    proc.wait(timeout=60)


def test_typing_shows_translation_heatmap_and_hover_lights_sources(
    chromium, server, tmp_path, record_property
):
    port = server
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{port}/")
    page.wait_for_selector("body[data-ready='1']")

    page.click("#src")
    page.keyboard.type(SENTENCE, delay=40)
    # drawn for the whole sentence: answers to earlier keystrokes are dropped
    page.wait_for_function("window.timing.drawn > window.timing.typed", timeout=20_000)
    page.wait_for_selector("#view .heat table.att")
    ms = page.evaluate("window.timing.drawn - window.timing.typed")
    print(f"keystroke to heatmap: {ms:.0f} ms")  # the target: <= 300 ms
    record_property("keystroke_to_heatmap_ms", round(ms))
    assert ms > 0

    att = _post(port, "/attention", {"text": SENTENCE, "nbest": 3, "attribution": True})
    assert page.inner_text("#translation") == att["translation"]
    assert att["translation"] == att["nbest"][0]["text"]
    items = page.locator("#nbest-list li")
    assert items.count() == len(att["nbest"])
    assert att["nbest"][0]["text"] in items.nth(0).inner_text()
    tgt, src, w = att["tgt_tokens"], att["src_tokens"], att["weights"]
    rows = page.locator("#view .heat tr")
    assert rows.count() == len(tgt) + 1
    assert page.locator("#view .heat th.src").all_inner_texts() == src
    assert page.locator("#view .attr table.att").count() == 1  # attribution
    assert "Spearman" in page.inner_text("#view")
    assert page.is_visible("#attr-explain")

    # a cell's weight
    page.hover("#view .heat tr:nth-child(2) td:nth-of-type(1)")
    assert page.inner_text("#tip") == f"{src[0]} → {tgt[0]}: {w[0][0]:.3f}"

    # hover a target piece: its sources lit with its weights, the tip lists them
    page.hover("#view .heat th.tgt[data-row='0']")
    lit = page.locator("#view .heat th.src.lit")
    assert lit.count() == len(src)
    weights = [
        float(x)
        for x in lit.evaluate_all("els => els.map(e => e.getAttribute('data-weight'))")
    ]
    assert weights == pytest.approx(w[0], abs=5e-4)
    tip = page.inner_text("#tip")
    assert tip.startswith(f"{tgt[0]} ←"), tip

    # each cell in the scale's colour of its weight, as the PNG draws it
    assert cell_colors(page, "#view .heat") == scale.rgb(np.array(w)).tolist()
    # 1e-5 as the background, 1 as the darkest, drawn by the page's own scripts
    page.evaluate(
        "AttentionView.render(document.getElementById('view'), {src_tokens: ['a', 'b'],"
        " tgt_tokens: ['x'], weights: [[1e-5, 0.99999]], title: 'probe'}, 9)"
    )
    assert cell_colors(page, "#sentence-9 .heat") == [
        [[255, 255, 255], scale.colors()[-1].tolist()]
    ]
    page.evaluate("document.getElementById('sentence-9').remove()")
    shot = tmp_path / "serve_page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    target = os.environ.get("SEQ2SEQ_SERVE_SCREENSHOT")
    if target:
        shutil.copyfile(shot, target)

    # force a reference: the heatmap's rows become its pieces
    page.fill("#ref", REFERENCE)
    page.wait_for_function(
        "document.querySelector('#view h2') && "
        "document.querySelector('#view h2').textContent.includes('reference')",
        timeout=20_000,
    )
    forced = _post(port, "/attention", {"text": SENTENCE, "reference": REFERENCE})
    heads = page.locator("#view .heat th.tgt").all_inner_texts()
    assert heads == forced["tgt_tokens"]
    assert page.inner_text("#translation") == REFERENCE

    # the scale's switch: log, said by the colour bar, kept for the next answer
    page.select_option("#view select.scale", "log")
    assert "log scale" in page.inner_text("#view .legend")
    log_colors = scale.rgb(np.array(forced["weights"]), "log").tolist()
    assert cell_colors(page, "#view .heat") == log_colors
    drawn = page.get_attribute("body", "data-drawn")
    page.fill("#ref", REFERENCE + " ")
    page.wait_for_function(
        "document.body.getAttribute('data-drawn') !== '" + drawn + "'", timeout=20_000
    )
    assert page.input_value("#view select.scale") == "log"

    # an over-long text: the server's one-line message on the page, no crash
    page.fill("#ref", "")
    page.fill("#src", " ".join(["egg"] * 300))
    page.wait_for_selector("#status.error", timeout=20_000)
    assert "max_input_pieces" in page.inner_text("#status")
    assert errors == [] or all("422" in e for e in errors), errors


def test_a_newer_keystroke_aborts_the_request_in_flight(chromium, server):
    """Each request the page sends carries an AbortController's signal; the next
    keystroke aborts it, so the server can drop it before its search."""
    page = chromium.new_page()
    page.add_init_script(
        "window.signals = []; const f = window.fetch; window.fetch = function (u, o) {"
        " if (o && o.signal) window.signals.push(o.signal);"
        " return f.apply(this, arguments); };"
    )
    page.goto(f"http://127.0.0.1:{server}/")
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#src", "Tom cooks")
    page.wait_for_function("window.signals.length === 1", timeout=20_000)
    page.type("#src", " this egg .")
    page.wait_for_function("window.timing.drawn > window.timing.typed", timeout=20_000)
    # A pause of more than the debounce between two typed characters (a loaded
    # machine) sends a request mid-word, which the next character aborts in turn:
    # every request but the latest is aborted, however many there were.
    aborted = page.evaluate("window.signals.map(s => s.aborted)")
    assert len(aborted) >= 2 and aborted == [True] * (len(aborted) - 1) + [False], aborted
    assert page.is_visible("#view .heat table.att")  # the latest answer drawn
    assert page.inner_text("#status") == ""  # the aborted one shows no error
