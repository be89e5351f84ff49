"""Run a console script's real entry point, pausing at a chosen call so that a test
can signal it mid-run: ``python tests/pause_driver.py MODULE:ATTR N SCRIPT ARGS...``
makes the ``N``-th call of ``MODULE.ATTR`` (``seq2seq.decoding.translator:
Translator.hypotheses``, ``os:fsync``) print ``PAUSED`` on stderr and sleep, then
go on as usual."""

from __future__ import annotations

import functools
import importlib
import sys
import time
from importlib.metadata import entry_points
from typing import Any


def pause_at(target: str, n: int) -> None:
    module_name, _, path = target.partition(":")
    *owners, name = path.split(".")
    owner: Any = importlib.import_module(module_name)
    for part in owners:
        owner = getattr(owner, part)
    real, calls = getattr(owner, name), [0]

    @functools.wraps(real)
    def paused(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == n:
            sys.stderr.write("PAUSED\n")
            sys.stderr.flush()
            time.sleep(120)
        return real(*args, **kwargs)

    setattr(owner, name, paused)


def main() -> None:
    target, n, script, *args = sys.argv[1:]
    pause_at(target, int(n))
    (entry,) = entry_points(group="console_scripts", name=script)
    sys.argv = [script, *args]
    entry.load()()


if __name__ == "__main__":
    main()
