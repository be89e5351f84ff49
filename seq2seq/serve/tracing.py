"""Each request's id and times: ``X-Request-Id`` taken from the request when it is
sane (1 to 128 letters, digits and ``-_.:``), else a new one (uuid4 hex), echoed on
every answer (errors too) and put on every log line written while it is answered;
``Server-Timing`` (``queue;dur=MS, compute;dur=MS``, or ``cache;desc=hit``) on the
answers of a search; and each answer counted by route and status for ``/metrics``.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from seq2seq.serve.guard import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass
class Trace:
    """One request: its id and the ``Server-Timing`` parts its answer gets."""

    request_id: str
    timing: list[str] = field(default_factory=list)

    def times(self, queue_s: float, compute_s: float) -> None:
        self.timing += [f"queue;dur={queue_s * 1000:.1f}"]
        self.timing += [f"compute;dur={compute_s * 1000:.1f}"]

    def cached(self) -> None:
        self.timing.append("cache;desc=hit")


CURRENT: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "seq2seq_serve_trace", default=None
)


def current() -> Trace:
    """The request being answered (a throwaway one outside a request)."""
    return CURRENT.get() or Trace("")


def request_id_of(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-Id`` when sane, else a new one."""
    for name, value in headers:
        if name.lower() == HEADER:
            given = value.decode("latin-1")
            if SANE.fullmatch(given):
                return given
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Adds ``request <id>:`` to a log line written while a request is answered
    (and ``record.request_id``, "" outside one), whatever the handler's format."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace = CURRENT.get()
        record.request_id = trace.request_id if trace else ""
        if trace and not getattr(record, "_with_id", False):
            record.msg = f"request {trace.request_id}: {record.msg}"
            record._with_id = True
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """The filter on every handler of ``logger`` (the root's: all lines)."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())


class Tracing:
    """Gives each HTTP request its ``Trace``, puts its headers on the answer, and
    tells ``count(route, status)`` (metrics) how it was answered."""

    def __init__(
        self,
        app: ASGIApp,
        route_of: Callable[[str], str],
        count: Callable[[str, int], None] | None = None,
    ):
        self.app = app
        self.route_of = route_of
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trace = Trace(request_id_of(scope["headers"]))
        token = CURRENT.set(trace)
        status = [0]

        async def send_traced(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != HEADER
                ]
                headers.append((HEADER, trace.request_id.encode()))
                if trace.timing:
                    headers.append((b"server-timing", ", ".join(trace.timing).encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_traced)
        finally:
            CURRENT.reset(token)
            if self.count is not None and status[0]:
                self.count(self.route_of(scope["path"]), status[0])


def route_label(path: str, routes: set[str]) -> str:
    """A request's route for the metrics: its path when it is a route; for a
    route with a parameter (``/static/{name}``) the part before it (``/static``);
    else ``other`` (so unknown paths do not make new series)."""
    if path in routes:
        return path
    for route in routes:
        head, brace, _ = route.partition("{")
        if brace and path.startswith(head) and "/" not in path[len(head) :]:
            return head.rstrip("/")
    return "other"
