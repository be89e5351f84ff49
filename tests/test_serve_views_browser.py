"""The page's views in a real headless Chromium: both directions (a reverse model's
attention and the symmetrized word links), the switch between pieces and words,
saving the view (PNG, SVG, JSON: Playwright's download event), the link that
reopens the view, and a 250-piece sentence drawn as one image.

Skips when Chromium or Playwright is missing (``SEQ2SEQ_REQUIRE_BROWSER=1``: fails).
The time to draw the 250-piece answer (DOM and layout) is printed, never asserted.
``SEQ2SEQ_TWOWAY_SCREENSHOT=PATH`` saves the page with both directions there
(docs/twoway_page.png), of ``SEQ2SEQ_SERVE_CHECKPOINT`` and
``SEQ2SEQ_SERVE_REVERSE_CHECKPOINT`` when both are set (else the tiny models), for the
sentence ``SEQ2SEQ_TWOWAY_TEXT`` (default: an English one)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from seq2seq.decoding.translator import Translator
from tests.test_serve_browser import _post, chromium, server  # noqa: F401 (fixtures)
from tests.test_serve_process import start_server
from tests.test_serve_whatif_browser import _drawn

pytestmark = pytest.mark.slow

SENTENCE = "Tom cooks this egg ."


def _open(chromium, port: int, hash_: str = ""):  # noqa: F811 (fixture)
    page = chromium.new_page(
        viewport={"width": 1280, "height": 1000}, accept_downloads=True
    )
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{port}/{hash_}")
    page.wait_for_selector("body[data-ready='1']")
    return page, errors


def _type(page, text: str) -> str:
    page.focus("#src")
    page.keyboard.type(text)
    return _drawn(page, None)


def _shown(page) -> dict:
    return page.evaluate("document.getElementById('sentence-0').shown")


@pytest.fixture
def twoway_server(request, tmp_path):
    """The server with a model each way: ``$SEQ2SEQ_SERVE_CHECKPOINT`` and
    ``$SEQ2SEQ_SERVE_REVERSE_CHECKPOINT``, or the tiny en→fr and fr→en models."""
    forward = os.environ.get("SEQ2SEQ_SERVE_CHECKPOINT")
    reverse = os.environ.get("SEQ2SEQ_SERVE_REVERSE_CHECKPOINT")
    if not (forward and reverse):
        forward = request.getfixturevalue("tiny_checkpoint")
        reverse = request.getfixturevalue("tiny_reverse_checkpoint")
    # (a lexicon on Multi30k's train split trains for a while at the start)
    proc, port, _ = start_server(
        Path(forward), tmp_path / "run", f"reverse_checkpoint={reverse}", wait_s=900
    )
    yield port
    proc.terminate()
    proc.wait(timeout=60)


def test_both_directions_drawn(chromium, twoway_server):  # noqa: F811 (fixture)
    port = twoway_server
    text = os.environ.get("SEQ2SEQ_TWOWAY_TEXT", SENTENCE)
    page, errors = _open(chromium, port)
    page.select_option("#nbest", "1")  # the tiny model's 3 best start with ""
    _type(page, text)
    rec = _post(port, "/attention", {"text": text, "nbest": 1})
    assert page.is_visible("#twoway") and rec["translation"]
    back = rec["reverse"]
    # the reverse model's map: its rows are the text's pieces, its columns the
    # translation's
    rows = page.locator("#sentence-1 .heat th.tgt").all_inner_texts()
    assert rows == back["tgt_tokens"]
    assert (
        page.locator("#sentence-1 .heat th.src").all_inner_texts() == back["src_tokens"]
    )
    assert "reverse model" in page.inner_text("#sentence-1 h2")
    if rec["two_way"] is not None:  # the word links, each set a line per link
        two = rec["two_way"]
        for cls, key in (("combined", "links"), ("forward", "forward_links")):
            n = len(two[key].split())
            assert page.locator(f"#twoway svg.links line.{cls}").count() == n
        words = page.locator("#twoway svg.links text.src").all_text_contents()
        assert words == text.split()
        assert two["rule"] in page.inner_text("#twoway")
    else:
        assert "no word links" in page.inner_text("#twoway")
    target = os.environ.get("SEQ2SEQ_TWOWAY_SCREENSHOT")
    if target:
        page.screenshot(path=target, full_page=True)
    assert errors == []


def _word_matrix(rec: dict) -> np.ndarray:
    """The API's weights over words as the page regroups them: a source word sums
    its pieces' columns, a target word averages its pieces' rows, </s> its own."""

    def units(tokens, words):
        held = {p for w in words for p in w["pieces"]}
        out = [w["pieces"] for w in words] + [
            [i] for i in range(len(tokens)) if i not in held
        ]
        return sorted(out)

    w = np.array(rec["weights"])
    src, tgt = (
        units(rec["src_tokens"], rec["src_words"]),
        units(rec["tgt_tokens"], rec["tgt_words"]),
    )
    return np.array([[w[np.ix_(r, c)].sum() / len(r) for c in src] for r in tgt])


def test_words_switch_exports_and_the_link_restores_the_view(
    chromium,  # noqa: F811 (fixture)
    server,  # noqa: F811 (fixture)
    tmp_path,
):
    port = server
    page, errors = _open(chromium, port)
    drawn = _type(page, SENTENCE)
    rec = _post(port, "/attention", {"text": SENTENCE, "nbest": 3})

    # the switch, by keyboard: the labels become words, the rows still sum to 1
    page.focus("#unit")
    page.keyboard.press("ArrowDown")
    assert page.input_value("#unit") == "words"
    words = [w["text"] for w in rec["src_words"]]
    assert page.locator("#view .heat th.src").all_inner_texts() == [*words, "</s>"]
    tgt = [*(w["text"] for w in rec["tgt_words"]), "</s>"]
    assert page.locator("#view .heat th.tgt").all_inner_texts() == tgt
    shown = _shown(page)
    np.testing.assert_allclose(shown["weights"], _word_matrix(rec), atol=1e-6)
    np.testing.assert_allclose(np.sum(shown["weights"], axis=1), 1, atol=1e-4)

    # knock out a word and choose the log scale: both go into the link
    page.select_option("#view select.scale", "log")
    page.focus("#knock button.word[data-word='0']")
    page.keyboard.press("Enter")
    drawn = _drawn(page, drawn)
    knocked = page.inner_text("#translation")

    # the three files, by keyboard, each of its type
    saved = {}
    for kind in ("png", "svg", "json"):
        with page.expect_download() as info:
            page.focus(f"#save-{kind}")
            page.keyboard.press("Enter")
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        assert path.suffix == f".{kind}" and "words" in path.name
        saved[kind] = path.read_bytes()
    assert saved["png"][:8] == b"\x89PNG\r\n\x1a\n"
    svg = ET.fromstring(saved["svg"])
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    shown = _shown(page)
    assert labels[1:] == shown["src_tokens"] + shown["tgt_tokens"]  # after the title
    data = json.loads(saved["json"])
    assert data["weights"] == shown["weights"] and data["unit"] == "words"
    assert data["scale"] == "log" and data["translation"] == knocked

    # the link reopens the same view: text, knock-out, unit, scale
    link = page.get_attribute("#link", "href")
    assert link.startswith("/#text=")
    again, errors2 = _open(chromium, port, link[1:])
    _drawn(again, None)
    assert again.input_value("#src") == SENTENCE
    assert again.input_value("#unit") == "words"
    assert again.input_value("#view select.scale") == "log"
    assert again.inner_text("#translation") == knocked
    assert again.locator("#knock button.word[aria-pressed='true']").count() == 1
    assert _shown(again)["weights"] == shown["weights"]
    assert errors == [] and errors2 == []


def _pieces(tr: Translator, word: str, n: int, target: bool = False) -> str:
    """``word`` repeated so that the text has at most ``n`` pieces."""
    encode = tr.tokenizer.encode_tgt if target else tr.tokenizer.encode_src
    each = len(encode([word])[0])
    return " ".join([word] * (n // each))


def test_a_250_piece_sentence_draws(chromium, server, request):  # noqa: F811
    checkpoint = os.environ.get("SEQ2SEQ_SERVE_CHECKPOINT")
    if checkpoint is None:  # the server's
        checkpoint = request.getfixturevalue("tiny_checkpoint")
    tr = Translator.from_checkpoint(checkpoint, device="cpu")
    text, ref = _pieces(tr, "egg", 249), _pieces(tr, "œuf", 249, target=True)
    port = server
    page, errors = _open(chromium, port)
    page.uncheck("#attr")  # the page's drawing is timed, not 250 gradients
    page.fill("#ref", ref)
    page.fill("#src", text)
    page.wait_for_function("window.timing.drawn > window.timing.typed", timeout=120_000)
    ms = page.evaluate("window.timing.render")
    rec = _post(port, "/attention", {"text": text, "reference": ref})
    n_src, n_tgt = len(rec["src_tokens"]), len(rec["tgt_tokens"])
    print(f"a {n_src} × {n_tgt}-piece answer drawn in {ms:.0f} ms (DOM and layout)")
    assert n_src >= 240 and n_tgt >= 240
    # one image on a grid of labels, not a table of n_src × n_tgt cells
    assert page.locator("#view .heat img.grid").count() == 1
    assert page.locator("#view .heat td").count() == 0
    assert page.locator("#view .heat .src").count() == n_src
    assert page.locator("#view .heat .tgt").count() == n_tgt
    grid = page.locator("#view .heat img.grid")
    # its corner into the viewport (the mouse reaches the viewport only)
    grid.evaluate("e => e.scrollIntoView({block: 'start', inline: 'start'})")
    box = grid.bounding_box()
    # the cell (0, 0): its weight in the tip
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    tip = page.inner_text("#tip")
    src, tgt, w = rec["src_tokens"], rec["tgt_tokens"], rec["weights"]
    assert tip == f"{src[0]} → {tgt[0]}: {w[0][0]:.3f}"
    # hovering a target piece lights its sources with its weights
    page.hover("#view .heat .tgt[data-row='3']")
    lit = page.locator("#view .heat .src.lit")
    assert lit.count() == n_src
    assert errors == []
