"""A disk that fills up, without a tmpfs: checkpoint writes fail with ENOSPC.

``simulate_full_disk(monkeypatch, limit)`` (in-process) and ``python
tests/full_disk.py LIMIT SCRIPT ARGS...`` (a console script's real entry point in
its own process) make every write to a checkpoint's temporary file
(``.<name>.pt.<random>.tmp``) fail as a full disk does once ``limit`` bytes are in:
``OSError(ENOSPC)`` from the write, which torch then reports as its own
``RuntimeError: [enforce fail at inline_container.cc] unexpected pos``. Other files
write as usual.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from importlib.metadata import entry_points
from typing import Any

_CHECKPOINT_TEMP = re.compile(r"\.[^/]+\.pt\.[^/]*\.tmp$")


class _FullFile:
    """A binary file whose writes fail with ENOSPC past ``limit`` bytes."""

    def __init__(self, handle: Any, limit: int) -> None:
        self._handle, self._left = handle, limit

    def write(self, data: bytes) -> int:
        if len(data) > self._left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._left -= len(data)
        return self._handle.write(data)

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def _full_fdopen(limit: int, real=os.fdopen):
    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        handle = real(fd, *args, **kwargs)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no /proc: every file opened this way fills the disk
            target = ".x.pt.y.tmp"
        return _FullFile(handle, limit) if _CHECKPOINT_TEMP.search(target) else handle

    return fdopen


def simulate_full_disk(monkeypatch: Any, limit: int = 512) -> None:
    monkeypatch.setattr(os, "fdopen", _full_fdopen(limit))


def main() -> None:
    limit, script, *args = sys.argv[1:]
    os.fdopen = _full_fdopen(int(limit))
    (entry,) = entry_points(group="console_scripts", name=script)
    sys.argv = [script, *args]
    entry.load()()


if __name__ == "__main__":
    main()
