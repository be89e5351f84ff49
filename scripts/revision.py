"""A module of the package as a git revision had it, imported beside today's, so a
benchmark can time the code before a change against the code now in one process."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

# Modules renamed since (old path: today's): a revision before the rename has the
# module under its old path, and its modules import it by its old name.
RENAMED = {
    "seq2seq/model/gru.py": "seq2seq/model/stepped_gru.py",
    "seq2seq/model/gru_recurrence.py": "seq2seq/model/deep_gru_loop.py",
}


def _name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _source(ref: str, path: str) -> str:
    """The file at ``path`` in revision ``ref``, or under the old path it had there."""
    old = [before for before, now in RENAMED.items() if now == path]
    for candidate in [path, *old]:
        shown = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{ref}:{candidate}"],
            capture_output=True,
            text=True,
        )
        if shown.returncode == 0:
            return shown.stdout
    raise FileNotFoundError(f"{path} (or an old name of it) is not in revision {ref}")


def module_at(ref: str, path: str) -> ModuleType:
    """The module in ``path`` (e.g. ``seq2seq/decoding/search.py``, today's path) at
    git revision ``ref``, under the name ``<its name>_baseline``; what it imports
    under an old name (``RENAMED``) is today's module."""
    for before, now in RENAMED.items():
        sys.modules.setdefault(_name(before), importlib.import_module(_name(now)))
    source = _source(ref, path)
    name = Path(path).stem + "_baseline"
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
