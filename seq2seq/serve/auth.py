"""Who may use the API: a key, sent as ``Authorization: Bearer KEY`` (or, for
clients that send it in the body, checked by the route with ``require``), compared
in constant time; and the rule that a server reachable from other machines has a
key unless ``allow_anonymous`` says otherwise.

The key comes from the ``api_key`` setting, else the environment's
``SEQ2SEQ_API_KEY`` (which keeps it out of the run directory's saved config).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seq2seq.config import ServeConfig
from seq2seq.errors import UserError
from seq2seq.serve.guard import ASGIApp, Receive, Scope, Send

ENV = "SEQ2SEQ_API_KEY"
# open without a key: liveness and readiness (probes carry no key), the page, the API
# docs and their files (they hold no model output; the requests they send carry the key)
OPEN_PATHS = frozenset(
    {"/health", "/ready", "/", "/favicon.ico", "/docs", "/openapi.json"}
)
OPEN_PREFIXES = ("/static/", "/docs/")


def is_local(host: str) -> bool:
    """Only this machine can connect (a loopback address, or localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def key_of(setting: str | None, environ: Mapping[str, str]) -> str | None:
    """The key: the ``api_key`` setting, else ``SEQ2SEQ_API_KEY``; blank is none."""
    key = setting if setting is not None else environ.get(ENV)
    return key if key and key.strip() else None


def check_exposure(host: str, key: str | None, allow_anonymous: bool) -> None:
    """Refuse to serve other machines without a key (a ``UserError`` naming the
    settings) unless anonymous use is allowed."""
    if is_local(host) or key is not None or allow_anonymous:
        return
    raise UserError(
        f"host={host} serves other machines: give a key (api_key=KEY, or the "
        f"environment's {ENV}) or allow_anonymous=true"
    )


@dataclass(frozen=True)
class Access:
    """The key (None: anyone may ask) and the origins whose pages may call the
    API (CORS); the defaults are ``ServeConfig``'s."""

    api_key: str | None = ServeConfig.api_key
    cors_origins: list[str] = field(default_factory=list)

    def allows(self, presented: str | None) -> bool:
        """``presented`` is the key (always, when there is none), in constant time."""
        if self.api_key is None:
            return True
        given = (presented or "").encode("utf-8", "surrogatepass")
        return hmac.compare_digest(given, self.api_key.encode("utf-8"))


class Unauthorized(Exception):
    """A request without the key: answered 401 with ``WWW-Authenticate: Bearer``."""


UNAUTHORIZED = (
    "this server needs its API key: send the header 'Authorization: Bearer KEY'"
)


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, if there is one."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def require(access: Access, presented: str | None) -> None:
    """For a route whose client sends the key in its body (``api_key``): raise
    ``Unauthorized`` unless it is the key."""
    if not access.allows(presented):
        raise Unauthorized(UNAUTHORIZED)


def unauthorized_body(message: str = UNAUTHORIZED) -> tuple[bytes, list]:
    """The 401's body and headers (one line of JSON)."""
    body = json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b"Bearer"),
    ]
    return body, headers


class KeyGuard:
    """Refuses requests without the key (401), except on the open paths and on
    ``self_checking`` ones (whose routes call ``require`` with a key from the
    body or the header)."""

    def __init__(self, app: ASGIApp, access: Access, self_checking: Iterable[str] = ()):
        self.app = app
        self.access = access
        self.self_checking = frozenset(self_checking)

    def is_open(self, path: str) -> bool:
        return (
            path in OPEN_PATHS
            or path in self.self_checking
            or path.startswith(OPEN_PREFIXES)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.access.api_key is None:
            await self.app(scope, receive, send)
            return
        if self.is_open(scope["path"]) or self.access.allows(bearer(scope["headers"])):
            await self.app(scope, receive, send)
            return
        body, headers = unauthorized_body()
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def access_of(cfg: Any, environ: Mapping[str, str]) -> Access:
    """The ``Access`` of ``seq2seq-serve``'s config and environment."""
    return Access(key_of(cfg.api_key, environ), list(cfg.cors_origins))
