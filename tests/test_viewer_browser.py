"""The HTML viewer in a real headless Chromium, driven over the DevTools Protocol.

Skips when no Chromium is installed (or ``websocket-client`` is missing), except with
``SEQ2SEQ_REQUIRE_BROWSER=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.viewer import alignment_html

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-allow-origins=*",
    "--remote-debugging-port=0",
    "--window-size=1200,900",
]


def _unavailable(reason: str):
    if os.environ.get("SEQ2SEQ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (SEQ2SEQ_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def chromium_binary() -> str:
    """The first Chromium on PATH; skips (fails under CI) without one."""
    binary = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if binary is None:
        _unavailable(f"no Chromium found (looked for {', '.join(BROWSERS)})")
    return binary


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, url: str):
        import websocket

        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def send(self, method: str, **params) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(expression)

    def errors(self) -> list[dict]:
        def is_error(method: str, params: dict) -> bool:
            if method == "Runtime.consoleAPICalled":
                return params["type"] == "error"
            if method == "Log.entryAdded":
                return params["entry"]["level"] == "error"
            return method == "Runtime.exceptionThrown"

        return [
            e["params"]
            for e in self.events
            if "method" in e and is_error(e["method"], e.get("params", {}))
        ]


@pytest.fixture
def browser(tmp_path):
    binary = chromium_binary()
    try:
        import websocket  # noqa: F401
    except ImportError:
        _unavailable("websocket-client is not installed (pip install -e '.[dev]')")
    profile = tmp_path / "profile"
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield DevTools(_page_socket(proc))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _page_socket(proc: subprocess.Popen) -> str:
    """The websocket URL of the browser's first page (via the port it prints)."""
    import urllib.request

    deadline = time.monotonic() + 30
    port = None
    while port is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"Chromium exited with {proc.returncode}")
        match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        port = match and match.group(1)
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise TimeoutError("no page target in Chromium")


SRC = ["▁le", "▁chat", "▁noir", "</s>"]
TGT = ["▁the", "▁black", "▁cat", "</s>"]


def _page(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(4), size=4)
    heads = rng.dirichlet(np.ones(4), size=(2, 4))
    # encoder self-attention (layers 2, heads 3, S, S), as issue 51's models give it
    self_attention = rng.dirichlet(np.ones(4), size=(2, 3, 4))
    sparse = AttentionMap(SRC, TGT, np.eye(4), title="sparse, with self-attention")
    setattr(sparse, "self_attention", self_attention)  # noqa: B010 (a field with #51)
    items = [
        AttentionMap(SRC, TGT, w, gold="0-0 2-1 1-2"),
        AttentionMap(
            SRC,
            TGT,
            heads.mean(0),
            heads=heads,
            attribution=w[::-1].copy(),
            spearman=0.25,
            title="multi-head <&>",
        ),
        sparse,
    ]
    path = tmp_path / "viewer.html"
    path.write_text(alignment_html(items), encoding="utf-8")
    return path, w, heads, self_attention


def _hover(dt: DevTools, selector: str) -> str:
    box = dt.evaluate(
        f"(function(){{var el=document.querySelector({json.dumps(selector)});"
        "el.scrollIntoView({block:'center'});var r=el.getBoundingClientRect();"
        "return [r.left+r.width/2, r.top+r.height/2];})()"
    )
    dt.send("Input.dispatchMouseEvent", type="mouseMoved", x=box[0], y=box[1])
    return dt.wait_for(
        "(function(){var t=document.getElementById('tip');"
        "return t.style.display==='block'?t.textContent:'';})()"
    )


def _cell(sentence: int, row: int, col: int) -> str:
    return (
        f"#sentence-{sentence} .heat:not([hidden]) tr:nth-child({row + 2}) "
        f"td:nth-of-type({col + 1})"
    )


def test_viewer_renders_hovers_switches_heads_and_saves_a_screenshot(browser, tmp_path):
    path, w, heads, self_attention = _page(tmp_path)
    dt = browser
    for domain in ("Runtime", "Log", "Page"):
        dt.send(f"{domain}.enable")
    dt.send(
        "Emulation.setDeviceMetricsOverride",
        width=1200,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    dt.send("Page.navigate", url=path.as_uri())
    dt.wait_for("document.body && document.body.getAttribute('data-ready') === '1'")

    assert dt.evaluate("document.querySelectorAll('section').length") == 3
    lines = "document.querySelectorAll('#sentence-0 svg.two line.w').length"
    assert dt.evaluate(lines) > 0
    assert dt.evaluate("document.querySelectorAll('svg line.sure').length") == 3
    assert _hover(dt, _cell(0, 1, 2)) == f"▁noir → ▁black: {w[1, 2]:.3f}"

    # The head selector switches the heatmap and the two-row view to one head.
    assert "mean" in dt.evaluate("document.querySelector('select.head').value")
    dt.evaluate(
        "(function(){var s=document.querySelector('#sentence-1 select.head');"
        "s.value='head 2';s.dispatchEvent(new Event('change'));})()"
    )
    assert _hover(dt, _cell(1, 3, 0)) == f"▁le → </s>: {heads[1, 3, 0]:.3f}"
    assert "Spearman" in dt.evaluate("document.getElementById('sentence-1').innerText")
    title = "document.querySelector('#sentence-1 h2').textContent"
    assert dt.evaluate(title) == "multi-head <&>"  # escaped, shown as written

    # Gold links outline their cells; the support of a sparse map is dotted.
    assert dt.evaluate("document.querySelectorAll('#sentence-0 td.sure').length") == 3
    support = "document.querySelectorAll('#sentence-2 .heat td.support').length"
    assert dt.evaluate(support) == 4
    assert (
        dt.evaluate("document.querySelectorAll('#sentence-0 td.support').length") == 0
    )
    text = dt.evaluate("document.getElementById('sentence-2').innerText")
    assert "75% of the weights are exactly 0" in text
    assert "above 0, blank exactly 0" in text  # the dot, named in the legend

    # Hovering a target piece lights its sources by weight.
    _hover(dt, "#sentence-0 .heat th.tgt[data-row='1']")
    lit = dt.evaluate(
        "Array.from(document.querySelectorAll('#sentence-0 .heat th.src.lit'))"
        ".map(function(e){return +e.getAttribute('data-weight');})"
    )
    np.testing.assert_allclose(lit, w[1], atol=5e-4)

    # The self-attention: source pieces on both axes, a layer and head selector.
    def self_cell(row: int, col: int) -> str:
        return (
            f"#sentence-2 .self-heat tr:nth-child({row + 2}) td:nth-of-type({col + 1})"
        )

    mean = self_attention[0].mean(0)
    assert _hover(dt, self_cell(1, 2)) == f"▁chat reads ▁noir: {mean[1, 2]:.3f}"
    dt.evaluate(
        "(function(){var s=document.getElementById('sentence-2');"
        "var l=s.querySelector('select.self-layer');"
        "var h=s.querySelector('select.self-head');"
        "l.value='layer 2';l.dispatchEvent(new Event('change'));"
        "h.value='head 3';h.dispatchEvent(new Event('change'));})()"
    )
    expected = self_attention[1, 2, 3, 0]
    assert _hover(dt, self_cell(3, 0)) == f"</s> reads ▁le: {expected:.3f}"

    dt.send("Input.dispatchMouseEvent", type="mouseMoved", x=5, y=5)  # hide the tip
    dt.evaluate("window.scrollTo(0, 0)")
    shot = dt.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    png = tmp_path / "viewer.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    assert png.stat().st_size > 10_000
    dt.send("Runtime.evaluate", expression="1")  # drain late events
    assert dt.errors() == [], dt.errors()


def cell_colors(dt: DevTools, selector: str) -> np.ndarray:
    """The computed background colour of each cell of a heatmap, ``(T, S, 3)``."""
    css = dt.evaluate(
        f"Array.from(document.querySelectorAll({json.dumps(selector + ' tr')}))"
        ".slice(1).map(function(tr){return Array.from(tr.querySelectorAll('td'))"
        ".map(function(td){return getComputedStyle(td).backgroundColor;});})"
    )
    return np.array(
        [[[int(x) for x in re.findall(r"\d+", c)[:3]] for c in row] for row in css]
    )


def test_viewer_draws_the_pngs_colours_and_switches_the_scale(browser, tmp_path):
    from seq2seq.alignment import scale
    from seq2seq.alignment.render import plot_alignment
    from tests.test_colour_scale import SATURATED, png_cells

    src, tgt = SRC, TGT[1:]
    sparse = np.array([[1e-5, 1 - 1e-5, 0, 0], [0, 0.3, 0.7, 0], [0, 0, 0, 1.0]])
    items = [AttentionMap(src, tgt, SATURATED), AttentionMap(src, tgt, sparse)]
    path = tmp_path / "colours.html"
    path.write_text(alignment_html(items), encoding="utf-8")
    dt = browser
    dt.send("Runtime.enable")
    dt.send("Page.navigate", url=path.as_uri())
    dt.wait_for("document.body && document.body.getAttribute('data-ready') === '1'")

    page = cell_colors(dt, "#sentence-0 .heat")
    assert page[0, 0].tolist() == [255, 255, 255]  # 1e-5: the background
    assert page[0, 1].tolist() == scale.colors()[-1].tolist()  # ≈ 1: the darkest
    png, _ = png_cells(plot_alignment(SATURATED, src, tgt), *SATURATED.shape)
    np.testing.assert_array_equal(page, png)  # the same matrix, the same colours

    # the sparse map: its support dotted, its exact zeros plain white
    images = dt.evaluate(
        "Array.from(document.querySelectorAll('#sentence-1 .heat td'))"
        ".map(function(td){return getComputedStyle(td).backgroundImage;})"
    )
    dotted = [i.startswith("radial-gradient") for i in images]
    assert dotted == (sparse > 0).ravel().tolist()
    np.testing.assert_array_equal(
        cell_colors(dt, "#sentence-1 .heat"), scale.rgb(sparse)
    )

    # the switch: the log scale, the colour bar says so, the PNG's log colours
    dt.evaluate(
        "(function(){var s=document.querySelector('#sentence-0 select.scale');"
        "s.value='log';s.dispatchEvent(new Event('change'));})()"
    )
    logged = cell_colors(dt, "#sentence-0 .heat")
    png, _ = png_cells(plot_alignment(SATURATED, src, tgt, scale="log"), 3, 4)
    np.testing.assert_array_equal(logged, png)
    assert logged[0, 0].tolist() != [255, 255, 255]  # 1e-5 now shows
    legend = dt.evaluate("document.querySelector('#sentence-0 .legend').innerText")
    assert "log scale" in legend and "1e-4" in legend
    dt.send("Runtime.evaluate", expression="1")
    assert dt.errors() == [], dt.errors()
