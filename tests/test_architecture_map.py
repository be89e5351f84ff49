"""The map: every module of ``seq2seq/`` has a place in docs/architecture.md's reading
order and in its package's ``__init__`` docstring (the package's short map).

The reading order is the fenced block under ``## Reading order``: a line
``  name.py  ...`` for a module beside ``config.py``, an entry ``  package/  ...``
(with its indented continuation lines) for a package, which names each of its
modules as ``name.py``. A package's ``__init__.py`` names each module as
``name``, and ``seq2seq/__init__.py`` each package and top-level module. A module
added without a place, or a name left on the map after its module went, fails here
with the place to fix.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "seq2seq"
DOC = ROOT / "docs" / "architecture.md"
TOP = ""  # the key of the modules beside config.py
# ``name.py`` as the map writes a module; ``cli/align.py`` elsewhere is a reference
MODULE = re.compile(r"(?<![\w/.])(\w+)\.py\b")
ENTRY = re.compile(r"^  (\w+)/\s")  # a package's entry
TOP_LINE = re.compile(r"^  (\w+)\.py\s")  # a module beside config.py


def package_modules(package: Path) -> dict[str, list[str]]:
    """Per package (``TOP`` for ``seq2seq/`` itself) its modules' names, without
    ``__init__``."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        key = TOP if len(rel.parts) == 1 else "/".join(rel.parts[:-1])
        found.setdefault(key, [])
        if path.stem != "__init__":
            found[key].append(path.stem)
    return found


def reading_order(doc: str) -> dict[str, set[str]]:
    """The modules the reading-order block names, per entry (``TOP``: the lines of
    the modules beside config.py; a package: its entry and continuation lines)."""
    section = doc.split("## Reading order", 1)[1]
    block = section.split("```", 2)[1]
    names: dict[str, set[str]] = {TOP: set()}
    current = None
    for line in block.splitlines():
        if (entry := ENTRY.match(line)) is not None:
            current = entry.group(1)
            names.setdefault(current, set())
        elif (top := TOP_LINE.match(line)) is not None:
            current = None
            names[TOP].add(top.group(1))
            continue
        elif not line.startswith("   "):  # ``seq2seq/`` or a blank line
            current = None
            continue
        if current is not None:
            names[current].update(MODULE.findall(line))
    return names


def package_docstrings(package: Path) -> dict[str, str]:
    """Per package (``TOP``: ``seq2seq/``) its ``__init__.py``'s docstring."""
    docs = {}
    for init in sorted(package.rglob("__init__.py")):
        rel = init.parent.relative_to(package)
        key = TOP if rel == Path(".") else rel.as_posix()
        docs[key] = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
    return docs


def unmapped(
    modules: dict[str, list[str]], order: dict[str, set[str]], docs: dict[str, str]
) -> list[str]:
    """What the map leaves out or names wrongly, one line each, with the place to
    fix."""
    where = "docs/architecture.md's reading order (the block under '## Reading order')"
    problems = []
    for package, names in modules.items():
        prefix = "seq2seq/" + (f"{package}/" if package else "")
        if package != TOP and package not in order:
            problems.append(
                f"{prefix} has no entry in {where}: add a line '  {package}/  ...' "
                "naming each of its modules as name.py, after the packages it imports"
            )
        mapped = order.get(package, set())
        for name in names:
            if name not in mapped:
                place = (
                    f"as a line '  {name}.py  ...' beside config.py"
                    if package == TOP
                    else f"as {name}.py in the '{package}/' entry"
                )
                problems.append(
                    f"{prefix}{name}.py is not on the map: name it {place} of {where}"
                )
            if f"``{name}``" not in docs.get(package, ""):
                problems.append(
                    f"{prefix}{name}.py is not on its package's map: name it as "
                    f"``{name}`` in the docstring of {prefix}__init__.py"
                )
        for name in sorted(mapped - set(names)):
            problems.append(
                f"{where} names {prefix}{name}.py, which does not exist: drop it or "
                "correct its name"
            )
        if package != TOP and f"``{package.split('/')[0]}``" not in docs[TOP]:
            problems.append(
                f"the package {prefix} is not on seq2seq/__init__.py's map: name it as "
                f"``{package}`` in its docstring"
            )
    return problems


def test_every_module_is_on_the_map():
    modules = package_modules(PACKAGE)
    order = reading_order(DOC.read_text("utf-8"))
    assert unmapped(modules, order, package_docstrings(PACKAGE)) == []


DOC_EXAMPLE = """
## Reading order

```
seq2seq/
  errors.py        UserError
  config.py        the schemas (data/files.py reads them)
  model/           attention.py (scores), decoder.py (the styles
                   share it; cli/align.py shows it)
  cli/             app.py, align.py: the commands
```
"""


def test_the_reading_order_is_read_entry_by_entry():
    assert reading_order(DOC_EXAMPLE) == {
        TOP: {"errors", "config"},
        "model": {"attention", "decoder"},
        "cli": {"app", "align"},
    }


def _fake_tree() -> tuple[dict, dict, dict]:
    modules = {TOP: ["config"], "model": ["attention", "decoder"]}
    order = {TOP: {"config"}, "model": {"attention", "decoder"}}
    docs = {TOP: "``config``, ``model``", "model": "``attention``, ``decoder``"}
    return modules, order, docs


def test_a_new_module_without_a_place_fails_naming_where_to_add_it():
    """The check can fail: a fake tree whose model package gains ``rope.py``."""
    modules, order, docs = _fake_tree()
    assert unmapped(modules, order, docs) == []
    modules["model"].append("rope")
    problems = unmapped(modules, order, docs)
    assert len(problems) == 2, problems
    assert "seq2seq/model/rope.py is not on the map" in problems[0]
    assert "as rope.py in the 'model/' entry of docs/architecture.md" in problems[0]
    assert "``rope`` in the docstring of seq2seq/model/__init__.py" in problems[1]


def test_a_new_package_or_top_level_module_fails_too():
    modules, order, docs = _fake_tree()
    modules[TOP].append("units")
    modules["serve"] = ["app"]
    problems = unmapped(modules, order, {**docs, "serve": "``app``"})
    assert any("seq2seq/units.py is not on the map" in p for p in problems), problems
    assert any("seq2seq/serve/ has no entry" in p for p in problems), problems
    assert any("``serve`` in its docstring" in p for p in problems), problems


def test_a_name_left_on_the_map_after_its_module_went_fails():
    modules, order, docs = _fake_tree()
    modules["model"].remove("decoder")
    problems = unmapped(modules, order, docs)
    assert problems == [
        "docs/architecture.md's reading order (the block under '## Reading order') "
        "names seq2seq/model/decoder.py, which does not exist: drop it or correct "
        "its name"
    ]
