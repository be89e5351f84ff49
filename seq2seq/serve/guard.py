"""Bodies refused before anything parses them: too large (413), not JSON by their
Content-Type (415; under the ``forms`` paths HTML forms too), not UTF-8 (400), each
with a one-line JSON message.

A pure ASGI middleware: it reads a request's body once (up to ``max_bytes``),
checks it, and hands the same bytes on to the application.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from seq2seq.config import ServeConfig

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WITH_BODY = {"POST", "PUT", "PATCH"}
FORMS = {"application/x-www-form-urlencoded", "multipart/form-data"}


async def send_error(send: Send, status: int, message: str) -> None:
    """A one-line JSON answer ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyGuard:
    """Refuses request bodies over ``max_bytes`` (default ``ServeConfig``'s
    ``max_body_bytes``), not sent as JSON (or as a form, under a path that starts
    with one of ``forms``), or not UTF-8."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = ServeConfig.max_body_bytes,
        forms: Sequence[str] = (),
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.forms = tuple(forms)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        kind = headers.get("content-type", b"").decode("latin-1").split(";")[0]
        kind = kind.strip().lower()
        forms = scope["path"].startswith(self.forms)
        if kind != "application/json" and not (forms and kind in FORMS):
            also = " or as a form (application/x-www-form-urlencoded)" if forms else ""
            await send_error(
                send,
                415,
                f"send the body as JSON, with Content-Type: application/json{also}",
            )
            return
        declared = headers.get("content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._too_large(send)
                return
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            await send_error(
                send,
                400,
                f"the body is not valid UTF-8 ({err.reason} at byte {err.start + 1}); "
                "send UTF-8 JSON",
            )
            return
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, send: Send) -> None:
        await send_error(
            send,
            413,
            f"the body is larger than {self.max_bytes} bytes: send fewer or shorter "
            "texts",
        )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the client sends next."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
