"""The layer rule: packages in reading order, imports pointing one way.

``config`` ← ``data`` ← ``model`` ← ``decoding`` ← ``alignment`` ← ``serve`` ←
``training`` ← ``cli``: a module imports only from its own layer and the layers
before it, and no module imports a command (``seq2seq.cli.<command>``; the
commands share ``seq2seq.cli.app`` and ``seq2seq.cli.checks``). Every import counts,
also those inside functions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "seq2seq"
LAYERS = (
    "config",
    "data",
    "model",
    "decoding",
    "alignment",
    "serve",
    "training",
    "cli",
)
# Modules beside config.py that belong to its layer: the error type every layer raises,
# the writes that finish or say why not (disk), and the value checks of the schemas;
# and the built-in phrasebook corpus, which imports nothing of the pipeline that reads
# it.
CONFIG_LAYER = ("errors", "disk", "config_checks", "phrasebook")
# What the commands share: the entry and error boundary, the decoding commands' rules.
CLI_SHARED = ("app", "checks")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    """The layer index of ``seq2seq.<layer>...``; None for the package itself (its
    ``__init__`` only re-exports the API) and for names in no layer."""
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in CONFIG_LAYER:
        return 0
    if len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def imported_modules(path: Path, name: str) -> list[tuple[int, list[str]]]:
    """Per import statement of the file: its line and the seq2seq modules it may load
    (``from seq2seq.cli import evaluate`` loads ``seq2seq.cli.evaluate``); relative
    imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        targets = [t for t in targets if t.split(".")[0] == "seq2seq"]
        if targets:
            found.append((node.lineno, targets))
    return found


def command_of(module: str) -> str | None:
    """``seq2seq.cli.<command>`` for a module inside a command, else None (the shared
    ``CLI_SHARED`` modules are no command)."""
    parts = module.split(".")
    if parts[:2] != ["seq2seq", "cli"] or len(parts) < 3 or parts[2] in CLI_SHARED:
        return None
    return ".".join(parts[:3])


def _problem(name: str, own: int | None, target: str) -> str | None:
    command = command_of(target)
    if command is not None and command != command_of(name):
        return f"{name} imports the command {command}"
    theirs = layer_of(target)
    if own is not None and theirs is not None and theirs > own:
        return (
            f"{name} ({LAYERS[own]}) imports {target} ({LAYERS[theirs]}, a later layer)"
        )
    return None


def violations(root: Path) -> list[str]:
    """Every import that breaks the layer rule, as ``file:line: message``."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        own = layer_of(name)
        for line, targets in imported_modules(path, name):
            problem = next(
                (p for t in targets if (p := _problem(name, own, t)) is not None), None
            )
            if problem is not None:
                problems.append(f"{path.relative_to(root.parent)}:{line}: {problem}")
    return problems


def test_every_module_is_in_a_layer():
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path, PACKAGE)
        if name != "seq2seq":
            assert layer_of(name) is not None, f"{path} is in no layer of {LAYERS}"


def test_imports_point_one_way():
    assert violations(PACKAGE) == []


def write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("module", "source", "message"),
    [
        ("model/decoder.py", "from seq2seq.decoding.search import x\n", "later layer"),
        ("data/corpus.py", "def f():\n    import seq2seq.training.trainer\n", "later"),
        ("training/pipeline.py", "from seq2seq.cli.evaluate import f\n", "command"),
        ("training/pipeline.py", "from seq2seq.cli import evaluate\n", "command"),
        ("cli/evaluate.py", "from seq2seq.cli.align import check_align\n", "command"),
        ("alignment/render.py", "from ..training import tracking\n", "later layer"),
        ("errors.py", "from seq2seq.data.corpus import CorpusError\n", "later layer"),
    ],
)
def test_the_checker_finds_a_forbidden_import(tmp_path, module, source, message):
    """The rule can fail: a copy of the layout with one forbidden import."""
    root = tmp_path / "seq2seq"
    for rel in ("__init__.py", "config.py", "cli/app.py", "cli/align.py"):
        write(root, rel)
    for layer in LAYERS[1:]:
        write(root, f"{layer}/__init__.py")
    write(root, "decoding/search.py")
    write(root, "cli/evaluate.py", "from seq2seq.cli.app import hydra_app\n")
    assert violations(root) == []
    write(root, module, source)
    problems = violations(root)
    assert len(problems) == 1 and message in problems[0], problems


def test_the_model_loads_no_training_tensorboard_matplotlib_or_viewer():
    """``import seq2seq.model`` (every module of it, and of decoding) stays light."""
    modules = sorted(
        module_name(p, PACKAGE)
        for layer in ("model", "decoding")
        for p in (PACKAGE / layer).glob("*.py")
    )
    heavy = ("seq2seq.training", "tensorboard", "matplotlib", "seq2seq.alignment")
    code = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        f"print([m for m in sys.modules if m.startswith({heavy!r})])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
