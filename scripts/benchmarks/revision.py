"""A module of the package as a git revision had it, imported beside today's, so a
benchmark can time the code before a change against the code now in one process."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def module_at(ref: str, path: str) -> ModuleType:
    """The module in ``path`` (e.g. ``seq2seq/decoding/search.py``) at git revision
    ``ref``, under the name ``<its name>_baseline``."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    name = Path(path).stem + "_baseline"
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
