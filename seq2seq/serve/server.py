"""Run the application with uvicorn: bind, say where, serve until Ctrl-C or SIGTERM.

The socket is bound here (``port=0``: any free port, named in the start line), to
``127.0.0.1`` unless told otherwise; the start line says who can reach it and
whether they need a key. On SIGINT or SIGTERM the app's ``health`` is told to drain
(``/ready`` answers 503), uvicorn stops accepting, lets the requests in flight
finish, and closes; ``serve`` then returns normally, so the command exits 0
(uvicorn would re-raise the signal: a handler of ours takes it instead). Log lines
written while a request is answered carry its id (``tracing``).
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from seq2seq.errors import UserError
from seq2seq.serve.auth import is_local
from seq2seq.serve.tracing import install_log_filter

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class BindError(UserError):
    """The host and port cannot be bound (in use, not this machine's, no right)."""


class _Server(uvicorn.Server):
    """uvicorn's server that tells the app's ``health`` when a stop signal comes."""

    def __init__(self, config: uvicorn.Config, health: Any):
        super().__init__(config)
        self.health = health

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.health is not None:
            self.health.drain()
        super().handle_exit(sig, frame)


def who_can_connect(host: str, keyed: bool) -> str:
    """The start line's second half: who may ask."""
    if is_local(host):
        return "only this machine can connect (host=0.0.0.0 serves others)"
    if keyed:
        return "every machine that can reach this one can connect, with the API key"
    return (
        "every machine that can reach this one can connect: no authentication "
        "(allow_anonymous=true)"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (IPv4 or IPv6)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        raise BindError(
            f"cannot serve on host={host} port={port}: {err.strerror or err}; "
            "give another port=N (0: any free one) or host=ADDRESS"
        ) from err
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@contextmanager
def _stop_signals() -> Iterator[list[int]]:
    """Record SIGINT and SIGTERM instead of raising them, while serving."""
    caught: list[int] = []
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, lambda number, frame: caught.append(number))
    try:
        yield caught
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def serve(
    app: Any,
    host: str,
    port: int,
    drain_s: float | None = None,
    keyed: bool = False,
) -> int:
    """Serve ``app`` until a stop signal; the signal's number (0 if none).
    ``keyed``: the app asks for an API key (the start line says so)."""
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    who = who_can_connect(host, keyed)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=drain_s,
        lifespan="on",
    )
    for logger in (logging.getLogger(), logging.getLogger("uvicorn")):
        install_log_filter(logger)  # uvicorn's handlers exist from its Config on
    server = _Server(config, getattr(app, "health", None))
    log.info("serving on http://%s:%d/ : %s; Ctrl-C stops", shown, actual, who)
    with _stop_signals() as caught:
        server.run(sockets=[sock])
    sock.close()
    if caught:
        name = signal.Signals(caught[0]).name
        log.info("stopped by %s; the requests in flight were answered", name)
    return caught[0] if caught else 0
