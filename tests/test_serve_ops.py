"""seq2seq-serve as a service, in-process around a stub engine (the model does not
matter here; the started server in ``test_serve_process.py`` uses a real one):
metrics, request ids and times, 429, abandoned requests, the answer cache,
liveness and readiness, API keys and CORS."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from fastapi import Request
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from seq2seq.errors import UserError
from seq2seq.serve.app import Serving, create_app
from seq2seq.serve.auth import (
    ENV,
    Access,
    KeyGuard,
    Unauthorized,
    check_exposure,
    key_of,
    require,
)
from seq2seq.serve.engine import CheckedRequest
from seq2seq.serve.tracing import RequestIdFilter, route_label


class StubEngine:
    """An engine whose answer is the texts upper-cased; ``gate`` (an Event) holds
    each run until set; ``runs`` records the payloads run."""

    def __init__(self, gate: threading.Event | None = None):
        self.gate = gate
        self.runs: list[list] = []
        self.fail = False
        self.translator = SimpleNamespace(config=None)  # no language pair of its own

    def info(self, serving):
        return {
            "version": "test",
            "model": {"checkpoints": ["best.pt"], "step": 40, "parameters": 123},
            "languages": {"source": "en", "target": "fr"},
            "serving": serving,
        }

    def check_translate(self, req):
        payload = (list(req.texts), req.prefixes)
        cost = sum(len(t.split()) for t in req.texts)
        return CheckedRequest(("translate", req.beam_size, req.nbest), payload, cost)

    def check_attention(self, req):
        return CheckedRequest(("attention",), req.text, 1)

    def run(self, key, payloads):
        self.runs.append([texts for texts, _ in payloads])
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise RuntimeError("a bug")
        return [
            {"translations": [t.upper() for t in texts], "nbest": [[] for _ in texts]}
            for texts, _ in payloads
        ]


def make(engine=None, access=None, **serving):
    engine = engine or StubEngine()
    app = create_app(engine, Serving(**serving), access)
    return TestClient(app, raise_server_exceptions=False), engine, app


def metrics_of(client, headers=None) -> dict:
    """The samples of ``/metrics``: {(name, labels as a sorted tuple): value}."""
    res = client.get("/metrics", headers=headers or {})
    assert res.status_code == 200, res.text
    assert res.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(res.text)
        for s in family.samples
    }


def translate(client, text="a red car", **headers):
    return client.post("/translate", json={"texts": [text]}, headers=headers)


def test_metrics_count_requests_times_batches_pieces_cache_and_the_model():
    one, _, _ = make()
    two, _, _ = make()  # a second app in the process: its own registry
    with one, two:
        assert translate(one).status_code == 200
        assert translate(one).status_code == 200  # the same: from the cache
        assert translate(one, "two green books").status_code == 200
        assert one.post("/translate", json={"texts": []}).status_code == 422
        got = metrics_of(one)
        assert (
            metrics_of(two).get(
                (
                    "seq2seq_serve_requests_total",
                    (("route", "/translate"), ("status", "200")),
                )
            )
            is None
        )
    requests = "seq2seq_serve_requests_total"
    assert got[(requests, (("route", "/translate"), ("status", "200")))] == 3
    assert got[(requests, (("route", "/translate"), ("status", "422")))] == 1
    assert got[("seq2seq_serve_queue_seconds_count", ())] == 2  # two searches
    assert got[("seq2seq_serve_compute_seconds_count", ())] == 2
    assert got[("seq2seq_serve_batch_size_count", ())] == 2
    assert got[("seq2seq_serve_pieces_total", ())] == 3 + 3  # words of the stub
    assert got[("seq2seq_serve_cache_total", (("result", "hit"),))] == 1
    assert got[("seq2seq_serve_cache_total", (("result", "miss"),))] == 2
    assert got[("seq2seq_serve_queue_depth", ())] == 0
    info = next(labels for (name, labels) in got if name == "seq2seq_serve_model_info")
    assert ("checkpoints", "best.pt") in info and ("source", "en") in info
    assert ("parameters", "123") in info


def test_metrics_off_and_bad_input_on_the_new_routes():
    client, _, _ = make(metrics=False)
    with client:
        res = client.get("/metrics")
        assert res.status_code == 404 and "no such page" in res.json()["error"]
        for path in ("/ready", "/health"):
            res = client.post(path, json={})
            assert res.status_code == 405 and "\n" not in res.text, res.text
            assert res.json() == {"error": f"POST is not allowed on {path}"}


def test_request_ids_are_echoed_or_made_on_every_answer():
    client, _, _ = make(max_body_bytes=100)
    with client:
        ok = translate(client, **{"X-Request-Id": "abc-123.x:y_z"})
        assert ok.headers["X-Request-Id"] == "abc-123.x:y_z"
        for bad in ("a" * 129, "white space", "ünïcode".encode("latin-1"), "<b>", ""):
            res = translate(client, **{"X-Request-Id": bad})
            made = res.headers["X-Request-Id"]
            assert made != bad and len(made) == 32 and int(made, 16) >= 0
        # errors too: 404, 413 (refused before parsing), 422
        assert client.get("/nothing").headers["X-Request-Id"]
        big = json.dumps({"texts": ["a " * 100]})
        res = client.post(
            "/translate",
            content=big,
            headers={"Content-Type": "application/json", "X-Request-Id": "big-1"},
        )
        assert res.status_code == 413 and res.headers["X-Request-Id"] == "big-1"
        made = {translate(client).headers["X-Request-Id"] for _ in range(3)}
        assert len(made) == 3  # one each


def test_server_timing_gives_queue_and_compute_or_a_cache_hit():
    client, _, _ = make()
    with client:
        first = translate(client, "the cat sleeps").headers["Server-Timing"]
        again = translate(client, "the cat sleeps").headers["Server-Timing"]
    parts = dict(p.strip().split(";", 1) for p in first.split(","))
    assert set(parts) == {"queue", "compute"}
    assert all(float(v.removeprefix("dur=")) >= 0 for v in parts.values())
    assert again == "cache;desc=hit"


def test_log_lines_carry_the_request_id(caplog):
    client, engine, _ = make()
    engine.fail = True
    caplog.handler.addFilter(RequestIdFilter())
    with client, caplog.at_level(logging.ERROR):
        res = translate(client, **{"X-Request-Id": "req-42"})
    assert res.status_code == 500 and res.headers["X-Request-Id"] == "req-42"
    lines = [r.getMessage() for r in caplog.records if "error while" in r.getMessage()]
    assert lines and all(line.startswith("request req-42: ") for line in lines)


def test_the_cache_answers_again_only_what_is_the_same():
    client, engine, _ = make(cache_size=2)
    with client:
        for body in (
            {"texts": ["a red car"]},
            {"texts": ["a red car"], "nbest": 1},  # the same request, said twice
            {"texts": ["a red car"], "beam_size": 2},  # another search
            {"texts": ["a red car"], "prefixes": ["un"]},
            {"texts": ["a red car"]},  # pushed out (least recently used)
        ):
            assert client.post("/translate", json=body).status_code == 200
    assert len(engine.runs) == 4
    off, engine, _ = make(cache_size=0)
    with off:
        for _ in range(3):
            translate(off)
    assert len(engine.runs) == 3


def test_a_full_queue_is_429_with_retry_after_in_one_line():
    gate = threading.Event()
    client, engine, _ = make(StubEngine(gate), max_queue=1)
    with client, ThreadPoolExecutor(2) as pool:
        running = pool.submit(translate, client, "one")
        _until(lambda: engine.runs)
        waiting = pool.submit(translate, client, "two")
        _until(lambda: client.get("/health").json()["waiting"] == 1)
        res = translate(client, "three")
        gate.set()
        assert running.result().status_code == waiting.result().status_code == 200
    assert res.status_code == 429 and res.headers["Retry-After"] == "1"
    assert "busy" in res.json()["error"] and "\n" not in res.text


def test_a_client_that_leaves_is_dropped_before_its_search():
    """B waits while A runs; B's client disconnects: B never reaches the engine
    and is counted as abandoned."""
    gate = threading.Event()
    client, engine, app = make(StubEngine(gate))
    with client, ThreadPoolExecutor(1) as pool:
        running = pool.submit(translate, client, "one")
        _until(lambda: engine.runs)
        status = client.portal.call(_leave, app, b'{"texts": ["two"]}')
        _until(lambda: client.get("/health").json()["waiting"] == 0)
        gate.set()
        assert running.result().status_code == 200
        assert translate(client, "three").status_code == 200
        got = metrics_of(client)
    assert status == 499  # what nobody reads
    assert engine.runs == [[["one"]], [["three"]]]
    assert got[("seq2seq_serve_abandoned_total", ())] == 1


async def _leave(app, body: bytes) -> int:
    """A request whose client disconnects once it waits; the status sent."""
    sent: list[dict] = []
    left = asyncio.Event()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/translate",
        "raw_path": b"/translate",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "state": {},
    }
    task = asyncio.ensure_future(app(scope, receive, send))
    batcher = app.health.batcher
    while batcher.pending() < 1:  # queued behind the running search
        await asyncio.sleep(0.005)
    left.set()
    await task
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def _until(condition, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.01)


def test_liveness_and_readiness():
    gate = threading.Event()
    client, engine, app = make(StubEngine(gate), timeout_s=0.3)
    before = client.get("/ready")  # no lifespan yet: the model thread not started
    assert before.status_code == 503 and "not loaded" in before.json()["error"]
    with client, ThreadPoolExecutor(2) as pool:
        assert client.get("/ready").json() == {"status": "ready", "waiting": 0}
        stuck = [pool.submit(translate, client, "one")]
        _until(lambda: engine.runs)  # running, held by the gate
        stuck.append(pool.submit(translate, client, "two"))
        _until(lambda: client.get("/health").json()["waiting"] == 1)
        time.sleep(0.35)  # past timeout_s with nothing finished
        res = client.get("/ready")
        assert res.status_code == 503 and "finished nothing" in res.json()["error"]
        assert client.get("/health").json()["status"] == "ok"  # alive all along
        gate.set()
        assert [f.result().status_code for f in stuck] == [503, 503]  # timed out
        _until(lambda: client.get("/ready").status_code == 200)
        app.health.drain()  # a stop signal came
        res = client.get("/ready")
        assert res.status_code == 503 and "stopping" in res.json()["error"]


KEY = {"Authorization": "Bearer s3cret"}


def test_a_key_guards_the_api_and_leaves_the_probes_and_page_open():
    client, engine, _ = make(access=Access("s3cret"))
    with client:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "s3cret"},
        ):
            res = translate(client, **headers)
            assert res.status_code == 401, res.text
            assert res.headers["WWW-Authenticate"] == "Bearer"
            assert "Authorization: Bearer" in res.json()["error"]
            assert "\n" not in res.text and res.headers["X-Request-Id"]
        for path in ("/metrics", "/info"):
            assert client.get(path).status_code == 401
        for path in ("/health", "/ready", "/", "/static/serve.js"):
            assert client.get(path).status_code == 200, path
        for path in ("/docs", "/openapi.json"):  # the API described, no model output
            assert client.get(path).status_code == 200, path
        assert translate(client, **KEY).json()["translations"] == ["A RED CAR"]
        metrics_of(client, KEY)
    assert engine.runs == [[["a red car"]]]  # the refused never ran


def test_a_key_in_a_body_and_where_it_comes_from():
    access = Access("s3cret")
    require(access, "s3cret")
    for wrong in (None, "", "s3cre", "s3cret ", "\ud800"):
        with pytest.raises(Unauthorized):
            require(access, wrong)
    require(Access(), None)  # no key: anyone
    assert key_of("a", {ENV: "b"}) == "a" and key_of(None, {ENV: "b"}) == "b"
    assert key_of(None, {}) is None and key_of("  ", {ENV: "b"}) is None


def test_serving_other_machines_needs_a_key_or_allow_anonymous():
    with pytest.raises(UserError) as err:
        check_exposure("0.0.0.0", None, False)
    message = str(err.value)
    assert "\n" not in message
    assert all(s in message for s in ("api_key=", ENV, "allow_anonymous=true"))
    check_exposure("0.0.0.0", "k", False)
    check_exposure("192.168.1.2", None, True)
    check_exposure("127.0.0.1", None, False)
    check_exposure("::1", None, False)


def test_cors_answers_the_origins_given_and_no_others():
    client, _, _ = make(access=Access(None, ["https://example.org"]))
    closed, _, _ = make()
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with client, closed:
        ok = client.options(
            "/translate", headers={"Origin": "https://example.org", **preflight}
        )
        other = client.options(
            "/translate", headers={"Origin": "https://evil.example", **preflight}
        )
        res = translate(client, **{"Origin": "https://example.org"})
        none = translate(closed, **{"Origin": "https://example.org"})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://example.org"
    assert "access-control-allow-origin" not in other.headers
    assert res.headers["access-control-allow-origin"] == "https://example.org"
    assert "x-request-id" in res.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in none.headers


def test_a_route_that_checks_a_body_key_itself_is_let_through():
    """``KeyGuard``'s ``self_checking`` routes reach their handler without the
    header (it calls ``require`` with the body's ``api_key``); the others do not."""

    async def echo(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    client = TestClient(KeyGuard(echo, Access("s3cret"), {"/libre"}))
    assert client.post("/libre", json={"api_key": "x"}).status_code == 204
    assert client.post("/other", json={}).status_code == 401
    assert client.post("/other", json={}, headers=KEY).status_code == 204


def test_a_route_wired_to_require_answers_401_in_one_line(monkeypatch):
    """How a LibreTranslate-style route takes its key from the body: listed in
    ``KEY_IN_BODY``, it calls ``auth.require``; a wrong key is the same 401."""
    from seq2seq.serve import app as app_module

    monkeypatch.setattr(app_module, "KEY_IN_BODY", frozenset({"/libre"}))
    client, _, traced = make(access=Access("s3cret"))
    inner = traced.app.app.app  # Tracing > KeyGuard > BodyGuard > FastAPI

    @inner.post("/libre")
    async def libre(body: dict, request: Request) -> dict:
        require(request.app.state.access, body.get("api_key"))
        return {"ok": True}

    with client:
        good = client.post("/libre", json={"api_key": "s3cret"})
        bad = client.post("/libre", json={"api_key": "nope"})
    assert good.json() == {"ok": True}
    assert bad.status_code == 401 and bad.headers["WWW-Authenticate"] == "Bearer"
    assert "\n" not in bad.text and "Authorization: Bearer" in bad.json()["error"]


def test_route_labels_name_routes_and_their_templates_and_nothing_else():
    routes = {"/translate", "/static/{name}", "/docs", "/docs/{name}"}
    assert route_label("/translate", routes) == "/translate"
    assert route_label("/static/app.js", routes) == "/static"
    assert route_label("/docs/swagger-ui.css", routes) == "/docs"
    assert route_label("/docs", routes) == "/docs"
    # unknown paths make no new series
    for path in ("/translate/x", "/static/a/b", "/nope", "/staticx"):
        assert route_label(path, routes) == "other"
