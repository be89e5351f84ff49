"""Writes that finish or leave nothing, and a refused write named for what it is.

A full disk (``ENOSPC``), a spent quota (``EDQUOT``) and a read-only file system
(``EROFS``) are the machine's state, not a bug and not the corpus's fault. Libraries
bury them: torch reports ``unexpected pos``, ``datasets`` "An error occurred while
generating the dataset", each with the ``OSError`` somewhere in its chain of causes.
``refusal`` finds it there, and ``refused_error`` turns it into one line naming the
path being written, the free space there and what needed the room
(``shutil.disk_usage``), so the user frees the disk instead of checking a good corpus.

``atomic_file`` writes a temporary file beside the target and renames it into place:
a file that exists is complete, whether the write was refused or the command was
interrupted, and the temporary file is removed either way. ``written()`` lists the
files this process completed, which an interrupted command reports.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from seq2seq.errors import UserError

REFUSALS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
}
_written: list[Path] = []


class WriteRefused(UserError, OSError):
    """A write the file system refused (full, over quota, read-only); the message
    names the path, the free space there and what needed it."""


def refusal(err: BaseException | None) -> OSError | None:
    """The ``OSError`` of a refused write in ``err`` or its causes, if any."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in REFUSALS:
            return err
        err = err.__cause__ or err.__context__
    return None


def free_space(path: str | os.PathLike) -> str:
    """The free space on the file system of ``path`` (or its nearest existing
    folder), in words."""
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return "unknown space"
    return f"{size_text(free)} free"


def folder_size(folder: str | os.PathLike) -> int:
    """The bytes of the files under ``folder`` (0 when there is none)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def size_text(n: float) -> str:
    """``n`` bytes in words: ``512 bytes``, ``3.9 MiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def refused_error(
    code: int,
    path: str | os.PathLike,
    what: str,
    elsewhere: str,
    note: str = "",
    kind: type[UserError] = WriteRefused,
    free: str | None = None,
) -> UserError:
    """``no space left on device while writing <what> <path> (<note>; 3.9 MiB free
    there): free some space, or <elsewhere>``; ``elsewhere`` is the setting that
    writes to another disk; ``free``: the free space measured before partial files
    were removed (measured now when None). A read-only file system gets neither the
    free space nor "free some space"."""
    if code == errno.EROFS:  # no amount of space would help
        free = ""
    elif free is None:
        free = free_space(path)
    notes = "; ".join(x for x in (note, f"{free} there" if free else "") if x)
    notes = f" ({notes})" if notes else ""
    fix = elsewhere if code == errno.EROFS else f"free some space, or {elsewhere}"
    writing = " ".join(x for x in (what, str(path)) if x)
    message = f"{REFUSALS[code]} while writing {writing}{notes}: {fix}"
    if issubclass(kind, OSError):
        error = kind(message)
        error.errno = code
        return error
    return kind(message)


def raise_if_refused(
    err: BaseException,
    path: str | os.PathLike,
    what: str,
    elsewhere: str,
    note: str = "",
    kind: type[UserError] = WriteRefused,
) -> None:
    """Raise ``refused_error`` from ``err`` when a refused write caused it; the path
    is the one the ``OSError`` names, else ``path``. A ``UserError`` is left as it
    is: it already says what went wrong."""
    if isinstance(err, UserError):
        return
    cause = refusal(err)
    if cause is not None:
        where = cause.filename or path
        raise refused_error(cause.errno, where, what, elsewhere, note, kind) from err


@contextmanager
def atomic_file(
    path: str | os.PathLike, what: str, elsewhere: str, binary: bool = False
) -> Iterator[IO[Any]]:
    """A handle on a temporary file beside ``path``, renamed to ``path`` when the
    block ends without error; removed otherwise (an interruption included), and a
    refused write raised as ``WriteRefused``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = "wb" if binary else "w"
            with open(tmp, mode, encoding=None if binary else "utf-8") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except Exception as err:
        raise_if_refused(err, path, what, elsewhere)
        raise
    _written.append(path)


def make_folder(folder: str | os.PathLike, what: str, elsewhere: str) -> Path:
    """``mkdir -p folder``; a refused one raised as ``WriteRefused``."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise_if_refused(err, folder, what, elsewhere)
        raise
    return Path(folder)


def write_atomic(
    path: str | os.PathLike, data: str | bytes, what: str, elsewhere: str
) -> Path:
    """Write ``data`` to ``path`` through ``atomic_file``; returns the path."""
    with atomic_file(path, what, elsewhere, binary=isinstance(data, bytes)) as out:
        out.write(data)
    return Path(path)


def written() -> list[Path]:
    """The files this process completed through ``atomic_file``, in order."""
    return list(_written)
