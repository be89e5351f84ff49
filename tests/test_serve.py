"""seq2seq-serve's API in-process (FastAPI's test client) against a tiny checkpoint:
the same answers as the ``Translator``, every bad input refused in one line, one
failing request leaving the server serving, concurrent clients batched."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields

import numpy as np
import pytest
from fastapi.testclient import TestClient
from omegaconf import OmegaConf

from seq2seq.alignment.attribution import model_attribution, spearman
from seq2seq.alignment.export import pharaoh_line
from seq2seq.alignment.viewer import asset
from seq2seq.config import ServeConfig
from seq2seq.decoding.maps import forced_split
from seq2seq.decoding.translator import Translator
from seq2seq.serve.app import Serving, create_app
from seq2seq.serve.auth import Access, access_of
from seq2seq.serve.batcher import Batcher
from seq2seq.serve.engine import Engine, Limits
from seq2seq.serve.guard import BodyGuard

TEXTS = ["the small blue chairs", "a red car", "the cat sleeps", "two green books"]


@pytest.fixture(scope="module")
def translator(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint, device="cpu")


LIMITS = Limits(max_texts=8, max_input_pieces=30)


def client_for(translator, limits=LIMITS, **serving):
    engine = Engine(translator, limits, ["best.pt"])
    app = create_app(engine, Serving(**{"max_body_bytes": 4096, **serving}))
    return TestClient(app, raise_server_exceptions=False), engine


@pytest.fixture(scope="module")
def client(translator):
    test_client, _ = client_for(translator)
    with test_client:
        yield test_client


def test_the_servers_defaults_are_serve_configs():
    """One source for the server's defaults: each part's are ``ServeConfig``'s."""
    schema = ServeConfig
    assert asdict(Serving()) == {k: getattr(schema, k) for k in asdict(Serving())}
    assert asdict(Limits()) == {k: getattr(schema, k) for k in asdict(Limits())}
    batcher = Batcher(lambda key, payloads: payloads)
    assert batcher.max_wait_s == schema.max_wait_ms / 1000
    assert (batcher.max_cost, batcher.max_queue) == (
        schema.batch_pieces,
        schema.max_queue,
    )
    assert BodyGuard(None).max_bytes == schema.max_body_bytes
    assert Access() == Access(schema.api_key, [])  # no key, no other origins


def test_the_command_carries_every_setting_by_name():
    """``seq2seq-serve``'s config reaches ``Limits`` and ``Serving`` whole: every
    field, each set away from its default here."""
    changed = {"batching": False, "max_wait_ms": 7.0, "batch_pieces": 99}
    changed |= {"max_queue": 3, "timeout_s": 2.5, "max_body_bytes": 123}
    changed |= {"max_texts": 4, "max_input_pieces": 11}
    changed |= {"metrics": False, "cache_size": 5}
    changed |= {"api_key": "k3y", "cors_origins": ["https://example.org"]}
    parts = (Serving, Limits, Access)
    names = {f.name for part in parts for f in fields(part)}
    assert names == set(changed)
    cfg = OmegaConf.merge(OmegaConf.structured(ServeConfig), changed)
    access = access_of(cfg, {})
    got = {**asdict(Serving.of(cfg)), **asdict(Limits.of(cfg)), **asdict(access)}
    assert got == changed


def test_translations_and_nbest_equal_the_translators(client, translator):
    res = client.post("/translate", json={"texts": TEXTS})
    assert res.status_code == 200, res.text
    assert res.json()["translations"] == translator.translate(TEXTS)
    res = client.post("/translate", json={"texts": TEXTS, "nbest": 3, "beam_size": 4})
    expected = translator.with_decoding(beam_size=4).nbest(TEXTS, 3)
    got = res.json()["nbest"]
    assert [[c["text"] for c in n] for n in got] == [
        [t for t, _ in n] for n in expected
    ]
    scores = [[c["score"] for c in n] for n in got]
    np.testing.assert_allclose(
        np.concatenate(scores), [s for n in expected for _, s in n], rtol=1e-5
    )
    assert all(len(n) == 3 for n in got)


def test_attention_equals_the_translators(client, translator):
    text = TEXTS[0]
    rec = client.post("/attention", json={"text": text}).json()
    (att,) = translator.attention([text])
    assert rec["src_tokens"] == att.src_tokens and rec["tgt_tokens"] == att.tgt_tokens
    np.testing.assert_allclose(rec["weights"], att.weights, atol=1e-6)
    assert rec["translation"] == translator.translate([text])[0]
    assert rec["links"] == pharaoh_line(att, True, False, None)
    assert rec["forced"] is False and rec["heads"] is None
    assert rec["self_attention"] is None and rec["attribution"] is None
    words = [w["text"] for w in rec["src_words"]]
    assert words == text.split()
    # forced through a reference
    ref = "les petites chaises bleues"
    rec = client.post("/attention", json={"text": text, "reference": ref}).json()
    (att,) = translator.attention([text], [ref])
    np.testing.assert_allclose(rec["weights"], att.weights, atol=1e-6)
    assert rec["forced"] is True and rec["translation"] == ref and rec["nbest"] == []
    # the n-best of the search it shows, as /translate's
    body = {"text": text, "nbest": 3, "beam_size": 4}
    rec = client.post("/attention", json=body).json()
    expected = translator.with_decoding(beam_size=4).nbest([text], 3)[0]
    assert [c["text"] for c in rec["nbest"]] == [t for t, _ in expected]
    assert rec["translation"] == expected[0][0]


def test_attribution_is_seq2seq_aligns(client, translator):
    """The same gradient × input and Spearman ρ that ``seq2seq-align
    attribution=true`` computes for the pair (``alignment/pipeline.py``'s
    ``collect``)."""
    text = TEXTS[1]
    rec = client.post("/attention", json={"text": text, "attribution": True}).json()
    split = translator.encode([text])
    hyps = translator.hypotheses(split)
    split = forced_split(split, [h.tokens for h in hyps])
    expected = model_attribution(translator, split.src_ids[0], split.tgt_ids[0])
    np.testing.assert_allclose(rec["attribution"], expected.numpy(), atol=1e-6)
    (att,) = translator.attention([text])
    assert rec["spearman"] == pytest.approx(spearman(att.weights, expected.numpy()))


def test_self_attention_is_passed_on_when_the_maps_have_it(translator, monkeypatch):
    """Models with an encoder self-attention put it on their maps (``self_attention``
    (layers, heads, S, S)); the API answers it as it is."""
    original = Translator.attention_maps

    def with_self(self, split, *args, **kwargs):
        maps = original(self, split, *args, **kwargs)
        for att in maps:
            s = len(att.src_tokens)
            w = np.random.default_rng(s).dirichlet(np.ones(s), size=(2, 3, s))
            setattr(att, "self_attention", w)  # noqa: B010 (the field arrives with #51)
        return maps

    monkeypatch.setattr(Translator, "attention_maps", with_self)
    test_client, _ = client_for(translator)
    with test_client:
        rec = test_client.post("/attention", json={"text": TEXTS[2]}).json()
    s = len(rec["src_tokens"])
    expected = np.random.default_rng(s).dirichlet(np.ones(s), size=(2, 3, s))
    np.testing.assert_allclose(rec["self_attention"], expected)


def test_health_info_page_and_files(client, translator):
    assert client.get("/health").json()["status"] == "ok"
    info = client.get("/info").json()
    assert info["languages"] == {"source": "en", "target": "fr"}
    assert info["vocabulary"]["source"] == translator.tokenizer.src_vocab_size
    assert info["decoding"]["beam_size"] == translator.beam_size
    assert info["limits"] == {"max_texts": 8, "max_input_pieces": 30}
    assert info["model"]["checkpoints"] == ["best.pt"] and info["attribution"]
    page = client.get("/")
    assert page.status_code == 200 and "/static/attention.js" in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN
    js = client.get("/static/attention.js")
    assert "AttentionView" in js.text and "javascript" in js.headers["content-type"]
    assert "/static/scale.js" in page.text  # the colour scale, before attention.js
    assert client.get("/static/scale.js").text == asset("scale.js")
    assert (
        "translate"
        in client.get("/openapi.json").json()["paths"]["/translate"]["post"][
            "operationId"
        ]
    )


LONG = " ".join(["chairs"] * 40)
BAD = [
    # (what, path, body, content type, status, words in the message)
    ("malformed JSON", "/translate", b'{"texts": ["a"', None, 400, "not valid JSON"),
    ("not UTF-8", "/translate", b'{"texts": ["\xff\xfe"]}', None, 400, "UTF-8"),
    (
        "latin-1 text",
        "/translate",
        '{"texts": ["é"]}'.encode("latin-1"),
        None,
        400,
        "UTF-8",
    ),
    (
        "not JSON by its type",
        "/translate",
        b'{"texts": ["a"]}',
        "text/plain",
        415,
        "JSON",
    ),
    ("no content type", "/translate", b'{"texts": ["a"]}', "", 415, "Content-Type"),
    ("empty body", "/translate", b"", None, 422, "empty"),
    ("a JSON list", "/translate", b'["a"]', None, 422, "JSON object"),
    (
        "texts a string",
        "/translate",
        b'{"texts": "a"}',
        None,
        422,
        "texts: Input should be a valid list",
    ),
    ("a number as text", "/translate", b'{"texts": [1]}', None, 422, "texts[0]"),
    (
        "beam size as string",
        "/translate",
        b'{"texts": ["a"], "beam_size": "3"}',
        None,
        422,
        "beam_size",
    ),
    (
        "beam size a bool",
        "/translate",
        b'{"texts": ["a"], "beam_size": true}',
        None,
        422,
        "beam_size",
    ),
    (
        "beam size 0",
        "/translate",
        b'{"texts": ["a"], "beam_size": 0}',
        None,
        422,
        "greater than or equal to 1",
    ),
    (
        "nbest 1000",
        "/translate",
        b'{"texts": ["a"], "nbest": 1000}',
        None,
        422,
        "nbest",
    ),
    (
        "unknown field",
        "/translate",
        b'{"texts": ["a"], "checkpoint": "/etc/passwd"}',
        None,
        422,
        "unknown field 'checkpoint'",
    ),
    ("no texts", "/translate", b'{"texts": []}', None, 422, "at least 1"),
    ("missing texts", "/translate", b"{}", None, 422, "texts: Field required"),
    (
        "an empty text",
        "/translate",
        b'{"texts": ["a", "  "]}',
        None,
        422,
        "texts[1] is empty",
    ),
    (
        "too many texts",
        "/translate",
        json.dumps({"texts": ["a"] * 9}).encode(),
        None,
        422,
        "at most 8",
    ),
    (
        "a text too long",
        "/translate",
        json.dumps({"texts": [LONG]}).encode(),
        None,
        422,
        "max_input_pieces",
    ),
    (
        "a lone surrogate",
        "/translate",
        b'{"texts": ["a\\ud800"]}',
        None,
        422,
        "not valid Unicode",
    ),
    (
        "a body too large",
        "/translate",
        json.dumps({"texts": ["a " * 3000]}).encode(),
        None,
        413,
        "larger than 4096",
    ),
    (
        "attention: no text",
        "/attention",
        b'{"reference": "a"}',
        None,
        422,
        "text: Field required",
    ),
    (
        "attention: empty reference",
        "/attention",
        b'{"text": "a", "reference": ""}',
        None,
        422,
        "reference is empty",
    ),
    (
        "attention: nbest 0",
        "/attention",
        b'{"text": "a", "nbest": 0}',
        None,
        422,
        "nbest",
    ),
    (
        "attention: a list",
        "/attention",
        b'{"text": ["a"]}',
        None,
        422,
        "text: Input should be a valid string",
    ),
    (
        "attention: unknown field",
        "/attention",
        b'{"text": "a", "model": "x.pt"}',
        None,
        422,
        "unknown field 'model'",
    ),
    ("no such page", "/nothing", b"{}", None, 404, "no such page"),
    ("no such file", "/static/..%2Fserve.py", None, None, 404, "no such"),
    ("wrong method", "/translate", None, None, 405, "GET is not allowed"),
]


@pytest.mark.parametrize(
    ("path", "body", "kind", "status", "words"),
    [b[1:] for b in BAD],
    ids=[b[0] for b in BAD],
)
def test_bad_input_is_a_4xx_in_one_line(client, path, body, kind, status, words):
    if body is None:
        res = client.get(path)
    else:
        headers = {"Content-Type": "application/json" if kind is None else kind}
        if kind == "":
            headers = {}
        res = client.post(path, content=body, headers=headers)
    assert res.status_code == status, res.text
    assert res.headers["content-type"] == "application/json"
    assert list(res.json()) == ["error"] and words in res.json()["error"], res.text
    assert "\n" not in res.text and "Traceback" not in res.text
    assert client.get("/health").status_code == 200  # still serving


def test_a_failing_request_leaves_the_server_serving(translator, monkeypatch):
    test_client, engine = client_for(translator)
    run = engine.run

    def broken(key, payloads):
        if any("boom" in texts for texts, _prefixes in payloads):
            raise RuntimeError("a bug")
        return run(key, payloads)

    monkeypatch.setattr(engine, "run", broken)
    with test_client:
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda t: test_client.post("/translate", json={"texts": [t]}),
                    ["boom", *TEXTS],
                )
            )
        assert answers[0].status_code == 500
        assert "internal error (RuntimeError)" in answers[0].json()["error"]
        assert "Traceback" not in answers[0].text
        # the others, maybe batched with it, are answered
        got = [a.json()["translations"][0] for a in answers[1:]]
        assert got == translator.translate(TEXTS)


def test_many_clients_at_once_get_what_one_at_a_time_gets(translator):
    texts = [f"{a} {b}" for a in ("the small", "a red", "two green") for b in TEXTS]
    test_client, _ = client_for(translator, max_wait_ms=20.0)
    with test_client:
        alone = [
            test_client.post("/translate", json={"texts": [t]}).json() for t in texts
        ]
        before = test_client.get("/info").json()["serving"]["batches"]
        with ThreadPoolExecutor(len(texts)) as pool:
            together = list(
                pool.map(
                    lambda t: test_client.post(
                        "/translate", json={"texts": [t]}
                    ).json(),
                    texts,
                )
            )
        batches = test_client.get("/info").json()["serving"]["batches"] - before
    assert [r["translations"] for r in together] == [r["translations"] for r in alone]

    def scores(answers):
        return [c["score"] for r in answers for n in r["nbest"] for c in n]

    # a batch sums in another order: the scores agree to float32's precision
    np.testing.assert_allclose(scores(together), scores(alone), rtol=1e-5)
    assert batches < len(texts)  # gathered into fewer searches


def test_a_slow_request_times_out_and_a_full_queue_is_busy(translator, monkeypatch):
    """A occupies the model thread (1 s) past its timeout (0.5 s); B, sent while A
    runs, waits in the queue (max_queue=1) and times out too (503); C finds it full
    (429). The
    requests are spaced so that the batcher cannot gather them into one search."""
    import time

    test_client, engine = client_for(translator, timeout_s=0.5, max_queue=1)
    run = engine.run
    monkeypatch.setattr(engine, "run", lambda k, p: (time.sleep(1.0), run(k, p))[1])

    def send(k: int):
        time.sleep(0.15 * k)
        return test_client.post("/translate", json={"texts": [TEXTS[k]]})

    with test_client, ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(send, range(3)))
    assert [a.status_code for a in answers] == [503, 503, 429], [
        a.text for a in answers
    ]
    errors = [a.json()["error"] for a in answers]
    assert all("no answer within 0.5 s" in e for e in errors[:2]), errors
    assert "busy" in errors[2], errors
    assert answers[2].headers["Retry-After"] == "1"  # when to try again
    assert all("\n" not in a.text and a.headers["X-Request-Id"] for a in answers)


def test_a_port_in_use_is_a_user_error_and_localhost_is_local():
    import socket

    from seq2seq.errors import UserError
    from seq2seq.serve.server import bind, is_local

    taken = bind("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(UserError, match=f"port={port}: .*give another port"):
            bind("127.0.0.1", port)
    finally:
        taken.close()
    assert is_local("127.0.0.1") and is_local("::1") and is_local("localhost")
    assert not is_local("0.0.0.0") and not is_local(socket.gethostname() + ".x")


def test_an_ensemble_translates_and_refuses_attribution(tiny_checkpoint):
    ensemble = Translator.from_checkpoint([tiny_checkpoint] * 2, device="cpu")
    test_client, _ = client_for(ensemble)
    with test_client:
        res = test_client.post("/translate", json={"texts": TEXTS})
        assert res.json()["translations"] == ensemble.translate(TEXTS)
        assert test_client.get("/info").json()["model"]["ensemble"] is True
        res = test_client.post("/attention", json={"text": "a", "attribution": True})
    assert res.status_code == 422
    assert "attribution explains one model" in res.json()["error"]
