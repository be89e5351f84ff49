"""The ASGI application: the JSON API, the page at ``/`` and its files, all from the
package (no CDN), and the one place where a request's mistakes become 4xx answers.

Every error is ``{"error": "<one line>"}``: a request without the key (401,
``auth``), a body refused by ``guard`` (400, 413, 415), a request that does not fit
the schema (400 for a body that is not JSON, 422 otherwise), one the model cannot
take (422), a full queue (429 with ``Retry-After``), a timeout (503). A bug while
answering one request is logged with its traceback and answered 500 in one line;
the server goes on serving the others. A request whose client leaves before its
search starts is dropped. ``/openapi.json`` holds the schemas, ``/docs`` shows them
(``apidocs``, no CDN); LibreTranslate's API is under ``/libretranslate``
(``libretranslate``, in its own words and status codes). Around it: ``tracing``
(request ids, times, counts), CORS when origins are given, ``auth.KeyGuard``,
``guard.BodyGuard``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from seq2seq.alignment.viewer import ASSETS, asset
from seq2seq.config import ServeConfig, fields_of
from seq2seq.serve import tracing
from seq2seq.serve.abandon import ABANDONED, ClientGone, until_gone
from seq2seq.serve.apidocs import add_api_docs
from seq2seq.serve.auth import Access, KeyGuard, Unauthorized, unauthorized_body
from seq2seq.serve.batcher import Batcher, Busy, TimedOut
from seq2seq.serve.cache import MISSING, AnswerCache, cache_key
from seq2seq.serve.engine import CheckedRequest, Engine, RequestError
from seq2seq.serve.guard import BodyGuard
from seq2seq.serve.health import Health
from seq2seq.serve.libretranslate import PREFIX, libretranslate_router
from seq2seq.serve.metrics import CONTENT_TYPE, Metrics, model_labels
from seq2seq.serve.schemas import (
    AttentionRequest,
    AttentionResponse,
    ErrorResponse,
    TranslateRequest,
    TranslateResponse,
)

log = logging.getLogger(__name__)

# The page's files: a name, not a path, so no request can name a file.
PAGE_FILES = {
    "scale.js": "application/javascript",
    "attention.js": "application/javascript",
    "attention.css": "text/css",
    "serve.js": "application/javascript",
    "whatif.js": "application/javascript",
    "share.js": "application/javascript",
    "serve.css": "text/css",
}
SCHEMAS = {"/translate": TranslateRequest, "/attention": AttentionRequest}
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 413, 415, 422, 429, 500, 503)
}
# routes that check the key themselves: LibreTranslate's clients send it in the body
# (``api_key``); its languages name the model's pair, as LibreTranslate's do to anyone
KEY_IN_BODY: frozenset[str] = frozenset({f"{PREFIX}/translate", f"{PREFIX}/languages"})
RETRY_AFTER_S = 1  # a full queue's Retry-After


@dataclass(frozen=True)
class Serving:
    """How requests are queued and gathered (``batcher.Batcher``), how long one may
    take, and how large a body may be (the defaults are ``ServeConfig``'s)."""

    batching: bool = ServeConfig.batching
    max_wait_ms: float = ServeConfig.max_wait_ms
    batch_pieces: int = ServeConfig.batch_pieces
    max_queue: int = ServeConfig.max_queue
    timeout_s: float = ServeConfig.timeout_s
    max_body_bytes: int = ServeConfig.max_body_bytes
    metrics: bool = ServeConfig.metrics
    cache_size: int = ServeConfig.cache_size

    @classmethod
    def of(cls, cfg: Any) -> Serving:
        """The settings of ``seq2seq-serve``'s config (the fields of these names)."""
        return fields_of(cls, cfg)


def _file(name: str) -> str:
    if name in ASSETS:  # the viewer's drawing code and colour scale
        return asset(name)
    return resources.files("seq2seq.serve").joinpath("static", name).read_text("utf-8")


def create_app(
    engine: Engine,
    serving: Serving | None = None,
    access: Access | None = None,
    thread: ThreadPoolExecutor | None = None,
) -> tracing.Tracing:
    """The application around ``engine`` (the model) in its middlewares; its
    ``health.drain()`` tells the probes that the server is stopping. ``thread``:
    the one the model was loaded on (``batcher.model_thread``), which runs its
    searches."""
    serving = serving or Serving()
    access = access or Access()
    files = {name: _file(name) for name in PAGE_FILES}
    page = _file("index.html")
    health = Health(serving.timeout_s)
    cache = AnswerCache(serving.cache_size)
    metrics = Metrics(
        lambda: health.batcher.pending() if health.batcher else 0,
        model_labels(engine.info({})),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher = Batcher(
            engine.run,
            max_wait_s=serving.max_wait_ms / 1000,
            max_cost=serving.batch_pieces,
            max_queue=serving.max_queue,
            batching=serving.batching,
            observe=metrics.observe,
            thread=thread,
        )
        batcher.start()
        app.state.batcher = health.batcher = batcher
        yield
        await batcher.stop()

    app = FastAPI(
        title="seq2seq-serve",
        summary="Translations, n-best lists and attention of an RNN translation model",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses=ERRORS,
    )
    app.state.access = access  # routes with a key in their body: auth.require

    async def answer(request: Request, job: CheckedRequest) -> Any:
        """The job's answer: a recent one again, or from the batcher (dropped if
        the client leaves before its search starts)."""
        key = cache_key(job.key, job.payload)
        kept = cache.get(key)
        metrics.cache.labels("hit" if kept is not MISSING else "miss").inc()
        if kept is not MISSING:
            tracing.current().cached()
            return kept
        batcher: Batcher = request.app.state.batcher
        try:
            result, queued = await until_gone(
                request,
                batcher.submit(job.key, job.payload, job.cost, serving.timeout_s),
            )
        except (Busy, TimedOut, RequestError):
            raise
        except ClientGone:
            metrics.abandoned.inc()
            return _error(ABANDONED, "the client closed the request")
        except Exception as err:  # a bug in this request: the others go on
            log.error("error while answering %s", request.url.path, exc_info=err)
            return internal_error(err)
        if queued.started is not None and queued.finished is not None:
            started = queued.started
            tracing.current().times(started - queued.queued, queued.finished - started)
        cache.put(key, result)
        return result

    @app.post("/translate", response_model=TranslateResponse)
    async def translate(req: TranslateRequest, request: Request) -> Any:
        """Translate texts; ``nbest`` alternatives per text with their scores."""
        return await answer(request, engine.check_translate(req))

    # the fields answered are those set: reverse and two_way only with a reverse model
    @app.post(
        "/attention",
        response_model=AttentionResponse,
        response_model_exclude_unset=True,
    )
    async def attention(req: AttentionRequest, request: Request) -> Any:
        """Where the model looked while translating ``text`` (or reading
        ``reference``): pieces, words, weights (per head, self-attention when the
        encoder has it), Pharaoh links, and gradient × input when asked."""
        return await answer(request, engine.check_attention(req))

    @app.get("/health")
    async def alive() -> dict[str, Any]:
        """``ok`` while the process serves (liveness); how many requests wait."""
        waiting = health.batcher.pending() if health.batcher else 0
        return {"status": "ok", "waiting": waiting}

    @app.get("/ready", responses={503: {"model": ErrorResponse}})
    async def ready() -> Any:
        """200 when a request sent now would be answered in time (readiness); 503
        before the model's thread starts, while stopping, or while work waits and
        the model has finished nothing within ``timeout_s``."""
        why = health.not_ready()
        if why is not None:
            return _error(503, f"not ready: {why}")
        return {"status": "ready", "waiting": health.batcher.pending()}

    if serving.metrics:

        @app.get("/metrics", include_in_schema=False)
        async def prometheus() -> Response:
            return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/info")
    async def info(request: Request) -> dict[str, Any]:
        """The model, languages, vocabulary, decoding settings, limits, version."""
        batcher: Batcher = request.app.state.batcher
        counts = {"batches": batcher.batches, "requests": batcher.jobs}
        return engine.info({**asdict(serving), **counts})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in files:
            raise HTTPException(404, f"no such file: {name}")
        return Response(files[name], media_type=PAGE_FILES[name])

    libre = libretranslate_router(engine, serving.timeout_s)
    app.include_router(libre, prefix=PREFIX)
    add_api_docs(app, app.title)
    _handle_errors(app)
    body_guard = BodyGuard(app, serving.max_body_bytes, forms=(PREFIX,))
    outer: Any = KeyGuard(body_guard, access, KEY_IN_BODY)
    if access.cors_origins:
        outer = CORSMiddleware(
            outer,
            allow_origins=access.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-Request-Id"],
            expose_headers=["X-Request-Id", "Server-Timing", "Retry-After"],
        )
    # an included router is one opaque entry of app.routes in newer FastAPI: its
    # routes are named from the router itself
    routes = {getattr(r, "path", "") for r in app.routes} - {""}
    routes |= {PREFIX + r.path for r in libre.routes}
    traced = tracing.Tracing(
        outer,
        lambda path: tracing.route_label(path, routes),
        lambda route, status: metrics.requests.labels(route, str(status)).inc(),
    )
    traced.health = health  # type: ignore[attr-defined]  (server.serve drains it)
    return traced


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)


def _handle_errors(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        return _error(*describe_invalid(err.errors(), SCHEMAS.get(request.url.path)))

    @app.exception_handler(HTTPException)
    async def http(request: Request, err: HTTPException) -> JSONResponse:
        message = err.detail
        if err.status_code == 404 and message == "Not Found":
            message = f"no such page: {request.url.path} (the API: /openapi.json)"
        elif err.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        return _error(err.status_code, message)

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError) -> JSONResponse:
        return _error(422, str(err))

    @app.exception_handler(Busy)
    async def busy(request: Request, err: Busy) -> JSONResponse:
        answer = _error(429, f"the server is busy ({err}); try again in a moment")
        answer.headers["Retry-After"] = str(RETRY_AFTER_S)
        return answer

    @app.exception_handler(Unauthorized)
    async def no_key(request: Request, err: Unauthorized) -> Response:
        body, headers = unauthorized_body(str(err))
        extra = {k.decode(): v.decode() for k, v in headers[2:]}
        return Response(body, 401, extra, media_type="application/json")

    @app.exception_handler(TimedOut)
    async def late(request: Request, err: TimedOut) -> JSONResponse:
        return _error(503, f"{err} (timeout_s); try a shorter text or fewer texts")

    @app.exception_handler(Exception)
    async def bug(request: Request, err: Exception) -> JSONResponse:
        log.error("error while answering %s", request.url.path, exc_info=err)
        return internal_error(err)


def internal_error(err: Exception) -> JSONResponse:
    """A bug's answer: one line, the traceback only in the server's log."""
    return _error(
        500,
        f"internal error ({type(err).__name__}), logged on the server; other "
        "requests are not affected",
    )


def describe_invalid(errors: list[dict[str, Any]], schema: Any) -> tuple[int, str]:
    """The first schema error in one line, with its status: 400 for a body that is
    not JSON, 422 for JSON that does not fit the schema."""
    if not errors:
        return 422, "the request does not fit the schema (see /openapi.json)"
    first = errors[0]
    kind, loc = first.get("type"), list(first.get("loc", ()))
    if loc and loc[0] == "body":
        loc = loc[1:]
    if kind == "json_invalid":
        where = f" at character {loc[0] + 1}" if loc and isinstance(loc[0], int) else ""
        detail = first.get("ctx", {}).get("error", "")
        return 400, f"the body is not valid JSON{where}: {detail}"
    fields = list(schema.model_fields) if schema is not None else []
    example = f"a JSON object with the fields {', '.join(fields)}" if fields else "JSON"
    if not loc:
        if kind == "missing":
            return 422, f"the body is empty: send {example}"
        return 422, f"the body must be {example}"
    name = str(loc[0]) + "".join(
        f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc[1:]
    )
    if kind == "extra_forbidden":
        return 422, f"unknown field {name!r}: the fields are {', '.join(fields)}"
    return 422, f"{name}: {first.get('msg', 'invalid')}"
