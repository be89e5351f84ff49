"""LibreTranslate's API and the API docs on a started ``seq2seq-serve``: a form sent
over HTTP as ``libretranslatepy`` sends it, and the docs page drawn in headless
Chromium with every request outside the server refused (it must need no network)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from seq2seq.decoding.translator import Translator
from tests.test_serve_browser import chromium  # noqa: F401 (a fixture)
from tests.test_serve_process import start_server

pytestmark = pytest.mark.slow
TEXT = "Tom cooks this egg .\nthe cat sleeps ."


@pytest.fixture(scope="module")
def port(tiny_checkpoint, tmp_path_factory):
    proc, port, _ = start_server(tiny_checkpoint, tmp_path_factory.mktemp("lt") / "run")
    yield port
    proc.terminate()
    proc.wait(timeout=60)


def post_form(port: int, fields: dict) -> tuple[int, dict]:
    """As ``libretranslatepy`` posts: URL-encoded fields, urllib's content type."""
    data = urllib.parse.urlencode(fields).encode()
    url = f"http://127.0.0.1:{port}/libretranslate/translate"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data), timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def test_a_form_over_http_is_translated_sentence_by_sentence(port, tiny_checkpoint):
    a, b = Translator.from_checkpoint(tiny_checkpoint, device="cpu").translate(
        TEXT.split("\n")
    )
    status, body = post_form(port, {"q": TEXT, "source": "en", "target": "fr"})
    assert (status, body) == (200, {"translatedText": f"{a}\n{b}"})
    status, body = post_form(port, {"q": TEXT, "source": "fr", "target": "en"})
    assert status == 400 and "is not available" in body["error"]


def test_the_docs_page_draws_every_route_with_no_network(port, chromium):  # noqa: F811
    page = chromium.new_page()
    outside, errors = [], []
    here = f"http://127.0.0.1:{port}/"

    def only_here(route):
        if route.request.url.startswith(here):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_here)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(here + "docs")
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/translate", "/libretranslate/translate", "/libretranslate/languages"} <= {
        p.strip() for p in paths
    }
    assert "LibreTranslate" in page.locator(".opblock-tag").all_inner_texts()
    assert outside == [] and errors == []
