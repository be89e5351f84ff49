"""Work for a request that stops when its client leaves: a page that sent a newer
keystroke aborts the older request, a client times out and hangs up. Its job is
cancelled, so the batcher drops it before its search starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")
ABANDONED = 499  # the status of a request whose client left (nobody reads it; counted)


class ClientGone(Exception):
    """The client disconnected before the answer; its work was cancelled."""


async def until_gone(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, or ``ClientGone`` (``work`` cancelled) when the client
    disconnects first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise ClientGone
    return task.result()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
