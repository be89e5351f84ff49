"""A disk that fills up (or a quota, or a read-only file system), without a tmpfs.

``simulate_full_disk(monkeypatch, limit, pattern, code)`` (in-process) and ``python
tests/full_disk.py LIMIT SCRIPT ARGS...`` (a console script's real entry point in its
own process; ``FULL_DISK_PATTERN`` and ``FULL_DISK_ERRNO`` in the environment choose
the files and the error) make every write to a file whose path matches ``pattern``
fail as the file system would once ``limit`` bytes are in: ``OSError(code)`` from the
write. Files are caught where Python opens them: ``os.fdopen`` (a checkpoint's
temporary file), ``open`` and ``io.open`` (``Path.write_text``, ``np.save``, the
files ``datasets`` writes its Arrow tables through). By default ``pattern`` is a
checkpoint's temporary file (``.<name>.pt.<random>.tmp``), which torch then reports
as its own ``RuntimeError: [enforce fail at inline_container.cc] unexpected pos``.
Other files write as usual.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import re
import sys
from importlib.metadata import entry_points
from typing import Any

CHECKPOINT_TEMP = r"\.[^/]+\.pt\.[^/]*\.tmp$"


class _FullFile:
    """A file whose writes fail with ``code`` past ``limit`` bytes (or characters)."""

    def __init__(self, handle: Any, limit: int, code: int) -> None:
        self._handle, self._left, self._code = handle, limit, code

    def write(self, data: Any) -> int:
        if len(data) > self._left:
            raise OSError(self._code, os.strerror(self._code))
        self._left -= len(data)
        return self._handle.write(data)

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def __iter__(self):
        return iter(self._handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def _writing(mode: Any) -> bool:
    return isinstance(mode, str) and any(c in mode for c in "wax+")


def _patched(limit: int, pattern: str, code: int) -> dict[str, Any]:
    """Replacements of ``os.fdopen`` and ``open`` that wrap matching files."""
    match = re.compile(pattern).search
    real_fdopen, real_open = os.fdopen, builtins.open

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        handle = real_fdopen(fd, *args, **kwargs)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no /proc: every file opened this way fills the disk
            target = ".x.pt.y.tmp"
        return _FullFile(handle, limit, code) if match(target) else handle

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        name = os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else ""
        if _writing(mode) and match(name):
            return _FullFile(handle, limit, code)
        return handle

    return {"fdopen": fdopen, "open": open_}


def simulate_full_disk(
    monkeypatch: Any,
    limit: int = 512,
    pattern: str = CHECKPOINT_TEMP,
    code: int = errno.ENOSPC,
) -> None:
    patched = _patched(limit, pattern, code)
    monkeypatch.setattr(os, "fdopen", patched["fdopen"])
    monkeypatch.setattr(builtins, "open", patched["open"])
    monkeypatch.setattr(io, "open", patched["open"])


def main() -> None:
    limit, script, *args = sys.argv[1:]
    pattern = os.environ.get("FULL_DISK_PATTERN", CHECKPOINT_TEMP)
    code = getattr(errno, os.environ.get("FULL_DISK_ERRNO", "ENOSPC"))
    patched = _patched(int(limit), pattern, code)
    os.fdopen = patched["fdopen"]
    builtins.open = io.open = patched["open"]
    (entry,) = entry_points(group="console_scripts", name=script)
    sys.argv = [script, *args]
    entry.load()()


if __name__ == "__main__":
    main()
