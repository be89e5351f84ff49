"""LibreTranslate's API on seq2seq-serve, in-process against a tiny checkpoint: JSON
and form requests, q as a string and as a list, alternatives, HTML whose markup is
kept, paragraphs cut into sentences and joined back, LibreTranslate's errors; and the
API docs page, served with no CDN."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient

from seq2seq.serve import libretranslate
from seq2seq.serve.app import Serving, create_app
from seq2seq.serve.auth import Access
from seq2seq.serve.batcher import Batcher, Busy
from seq2seq.serve.engine import Engine, Limits
from seq2seq.serve.libre_fields import LibreError
from seq2seq.serve.markup import read_markup
from seq2seq.serve.sentences import split_sentences
from tests import test_serve_ops, test_serve_whatif

# the tiny model's translator and an in-process client (max_texts 8, 30 pieces a text)
translator, client = test_serve_whatif.translator, test_serve_whatif.client

URL = "/libretranslate/translate"
A, B, C = "the cat sleeps .", "Tom cooks this egg .", "two green books ."


def ask(client, **fields):
    return client.post(URL, json={"source": "en", "target": "fr", **fields})


def test_a_string_as_json_or_form_is_the_translators(client, translator):
    (expected,) = translator.translate([A])
    assert ask(client, q=A).json() == {"translatedText": expected}
    form = {"q": A, "source": "en", "target": "fr", "api_key": ""}
    assert client.post(URL, data=form).json() == {"translatedText": expected}
    multipart = {k: (None, v) for k, v in form.items()}
    assert client.post(URL, files=multipart).json() == {"translatedText": expected}


def test_a_list_gives_a_list_and_blank_texts_come_back_as_they_were(client, translator):
    res = ask(client, q=[A, "  ", B])
    assert res.status_code == 200, res.text
    a, b = translator.translate([A, B])
    assert res.json() == {"translatedText": [a, "  ", b]}


def test_a_paragraph_is_its_sentences_translations_joined_with_its_spacing(
    client, translator
):
    paragraph = f"  {A}  {B}\n\n{C} "
    a, b, c = translator.translate([A, B, C])
    got = ask(client, q=paragraph).json()["translatedText"]
    assert got == f"  {a}  {b}\n\n{c} "


def test_alternatives_are_the_nbest_after_the_best(client, translator):
    (nbest,) = translator.nbest([A], 3)
    best, others = nbest[0][0], [t for t, _ in nbest[1:]]
    res = ask(client, q=A, alternatives=2).json()
    assert res["translatedText"] == best
    assert res["alternatives"] == [t for t in others if t != best]
    listed = ask(client, q=[A, A], alternatives="2").json()  # digits as LT reads them
    assert listed["alternatives"] == [res["alternatives"]] * 2
    assert "alternatives" not in ask(client, q=A).json()


def test_html_keeps_the_markup_and_translates_each_text_node(client, translator):
    doc = (
        '<!DOCTYPE html><p class="x" title="a &amp; b">{A} <b>{B}</b></p>'
        "<br/><img src='c.png' alt=\"c\"><!-- note --><script>if (a<b) {{}}</script>"
        "<code>x &lt; y</code>"
    )
    a, b = translator.translate([A, B])
    res = ask(client, q=doc.format(A=A, B=B), format="html", alternatives=1).json()
    esc = html.escape
    assert res["translatedText"] == doc.format(A=esc(a, False), B=esc(b, False))
    assert res["alternatives"] == []  # none for HTML, as in LibreTranslate


def test_markup_escapes_translations_and_keeps_everything_else():
    doc = "<div id=d>a < b &amp; c<P>Upper</P><![CDATA[x]]><style>p>b{}</style></div>"
    markup = read_markup(doc)
    assert markup.text_nodes == ["a < b & c", "Upper"]
    assert markup.fill(["x<y&z", "U"]) == (
        "<div id=d>x&lt;y&amp;z<P>U</p><![CDATA[x]]><style>p>b{}</style></div>"
    )


@pytest.mark.parametrize(
    "text",
    ["", "one", "  Dr. Smith came. He saw it!\r\n\tWhy?  ", "a .\n\n\nb . c ."],
)
def test_sentences_join_back_to_the_text(text):
    paragraph = split_sentences(text)
    assert paragraph.join(paragraph.sentences) == text
    assert all(s == s.strip() and s for s in paragraph.sentences)


def test_sentences_are_cut_at_their_ends_not_at_abbreviations():
    text = "Dr. Smith came at 3 p.m. yesterday. He saw it!\nWhy"
    assert split_sentences(text).sentences == (
        "Dr. Smith came at 3 p.m. yesterday.",
        "He saw it!",
        "Why",
    )


def test_a_long_line_is_split_in_parts_with_the_same_sentences():
    line = " ".join(f"Dr. Smith cooks egg {k} ." for k in range(300))  # 8 kB
    paragraph = split_sentences(line)
    assert paragraph.join(paragraph.sentences) == line
    assert paragraph.sentences == tuple(
        f"Dr. Smith cooks egg {k} ." for k in range(300)
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"q": ""}, "Invalid request: missing q parameter"),
        ({"q": A, "target": ""}, "Invalid request: missing target parameter"),
        ({"q": A, "format": "xml"}, "xml format is not supported"),
        ({"q": A, "target": "de"}, "de is not supported"),
        (
            {"q": A, "source": "fr", "target": "en"},
            "English (en) is not available as a target language from French (fr)",
        ),
        ({"q": [A] * 9}, "Invalid request: request (9) exceeds text limit (8)"),
        ({"q": A, "alternatives": "x"}, "alternatives parameter is not a number"),
        ({"q": A, "alternatives": None}, "alternatives parameter is not a number"),
        ({"q": A, "alternatives": 10}, "alternatives parameter must be <= 9"),
        ({"q": [A, 3]}, "q must be a string or a list of strings"),
        ({"q": "word " * 40}, "pieces: this server takes at most 30"),
        ({"q": "word . " * 130}, "pieces) exceeds text limit (240 pieces"),
    ],
)
def test_bad_input_is_400_in_one_line_as_libretranslate_says(client, fields, message):
    res = ask(client, **fields)
    assert res.status_code == 400
    error = res.json()["error"]
    assert message in error and "\n" not in error


def test_a_body_that_is_not_a_json_object_is_400(client):
    headers = {"content-type": "application/json"}
    for body in (b"[1]", b"{not json"):
        res = client.post(URL, content=body, headers=headers)
        assert (res.status_code, res.json()) == (400, {"error": "Invalid JSON format"})
    # JSON may escape a lone surrogate, which is no text
    body = b'{"q": "a \\ud800", "source": "en", "target": "fr"}'
    res = client.post(URL, content=body, headers=headers)
    assert res.status_code == 400
    assert "q is not valid Unicode (surrogates not allowed" in res.json()["error"]


def test_forms_are_taken_only_by_the_libretranslate_routes(client):
    assert client.post("/translate", data={"texts": A}).status_code == 415
    res = client.post(URL, content=b"q=x", headers={"content-type": "text/plain"})
    assert res.status_code == 415 and "form" in res.json()["error"]


def test_auto_is_the_models_source_language(client, translator):
    res = ask(client, q=[A], source="auto").json()
    assert res["translatedText"] == translator.translate([A])
    assert res["detectedLanguage"] == [{"confidence": 100.0, "language": "en"}]


def test_the_api_key_reaches_check_key_whose_refusal_is_403(client, monkeypatch):
    seen = []

    def refuse(request, api_key):
        seen.append(api_key)
        raise LibreError(403, "Invalid API key")

    monkeypatch.setattr(libretranslate, "check_key", refuse)
    form = {"q": A, "source": "en", "target": "fr", "api_key": "k1"}
    res = client.post(URL, data=form)
    assert (res.status_code, res.json()) == (403, {"error": "Invalid API key"})
    assert seen == ["k1"]


def test_a_keyed_server_takes_the_key_from_the_body_or_the_header(translator):
    engine = Engine(translator, Limits(max_texts=8, max_input_pieces=30), ["t.pt"])
    app = create_app(engine, Serving(), Access("s3cret"))
    with TestClient(app, raise_server_exceptions=False) as keyed:
        for form in ({}, {"api_key": "wrong"}, {"api_key": "s3cret "}):
            res = keyed.post(URL, data={"q": A, "source": "en", "target": "fr", **form})
            assert (res.status_code, res.json()) == (403, {"error": "Invalid API key"})
        good = {"q": A, "source": "en", "target": "fr", "api_key": "s3cret"}
        expected = translator.translate([A])[0]
        assert keyed.post(URL, data=good).json()["translatedText"] == expected
        fields = {"q": A, "source": "en", "target": "fr"}
        res = keyed.post(URL, json=fields, headers={"Authorization": "Bearer s3cret"})
        assert res.json() == {"translatedText": expected}, res.text
        # the languages are open, as LibreTranslate's are; the server's own API is not
        assert keyed.get("/libretranslate/languages").status_code == 200
        assert keyed.post("/translate", json={"texts": [A]}).status_code == 401


def test_a_full_queue_is_429(client, monkeypatch):
    async def busy(*args, **kwargs):
        raise Busy("256 requests are waiting")

    monkeypatch.setattr(Batcher, "submit", busy)
    res = ask(client, q=A)
    assert res.status_code == 429 and res.json()["error"].startswith("Slowdown:")


def test_languages_are_the_models_pair(client, translator):
    src, tgt = translator.config.data.src_lang, translator.config.data.tgt_lang
    assert client.get("/libretranslate/languages").json() == [
        {"code": src, "name": "English", "targets": [tgt]},
        {"code": tgt, "name": "French", "targets": []},
    ]


def test_the_api_docs_load_from_the_server_alone(client):
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*["']([^"']+)""", page.text)
    assert len(urls) >= 4 and all(u.startswith("/") for u in urls), urls
    assert not re.search(r"https?://", page.text)
    files = [("swagger-ui-bundle.js", "javascript"), ("swagger-ui.css", "css")]
    for name, kind in files:
        res = client.get(f"/docs/{name}")
        assert res.status_code == 200 and kind in res.headers["content-type"]
        assert len(res.content) > 10_000
    assert client.get("/docs/../app.py").status_code == 404
    assert client.get("/redoc").status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in [(URL, "post"), ("/libretranslate/languages", "get")]:
        assert paths[path][method]["tags"] == ["LibreTranslate"]
    body = paths[URL]["post"]["requestBody"]["content"]
    assert set(body) >= {"application/json", "application/x-www-form-urlencoded"}


def test_the_metrics_count_libretranslates_routes_by_name(translator):
    engine = Engine(translator, Limits(max_texts=8, max_input_pieces=30), ["t.pt"])
    with TestClient(create_app(engine, Serving())) as client:
        assert ask(client, q=A).status_code == 200
        assert ask(client, q=A, source="xx").status_code == 400
        assert client.get("/libretranslate/languages").status_code == 200
        assert client.get("/docs/swagger-ui.css").status_code == 200
        got = test_serve_ops.metrics_of(client)
    counted: dict[str, float] = {}
    for (name, labels), value in got.items():
        if name == "seq2seq_serve_requests_total":
            route = dict(labels)["route"]
            counted[route] = counted.get(route, 0) + value
    assert counted == {
        "/libretranslate/translate": 2,
        "/libretranslate/languages": 1,
        "/docs": 1,
    }
