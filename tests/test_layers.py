"""The package's layers (README, "Layout"): each subpackage imports only the layers below it, top-level imports and
those inside functions alike; no module over 400 lines; a task travels as an object below the run's resolution."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mrtpo"
#: bottom to top; ``cli`` is the top (``mrtpo/cli.py``)
LAYERS = ("files", "method", "tasks", "models", "runs", "analysis", "book", "cli")
#: where a task name may still be looked up (``get_task``): the tasks' own registry, where a user names a task (the
#: CLI; ``runs.config.resolve``, which stores the object in ``RunConfig.task_def``; the analysis a notebook calls
#: with a task's name), never below
LOOKUPS = ("tasks", "cli", "runs/config.py", "analysis")


def layer_of(module: str) -> str | None:
    """The layer of a dotted module under ``mrtpo`` (None: the package root, ``mrtpo/__init__.py``)."""
    parts = module.split(".")
    if parts[0] != "mrtpo" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in LAYERS else None


def modules(root: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.name != "__main__.py")


def dotted(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, function bodies included; ``from a import b`` names
    the module ``a.b`` where ``b`` is one."""
    own = dotted(path, root).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = root.parent.joinpath(*f"{module}.{a.name}".split("."))
                is_module = sub.with_suffix(".py").exists() or (sub / "__init__.py").exists()
                found.append((node.lineno, f"{module}.{a.name}" if is_module else module))
    return found


def upward_imports(path: Path, root: Path = PACKAGE) -> list[str]:
    here = layer_of(dotted(path, root))
    if here is None:
        return []
    rank = LAYERS.index(here)
    return [f"{path.relative_to(root.parent)}:{line} imports {module} ({layer_of(module)} is above {here})"
            for line, module in imports(path, root)
            if layer_of(module) is not None and LAYERS.index(layer_of(module)) > rank]


def test_every_module_sits_in_a_layer():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "cli")]
    assert not loose, f"modules outside the layer packages: {loose}"
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == set(LAYERS) - {"cli"}


def test_no_layer_imports_a_higher_one():
    wrong = [line for path in modules() for line in upward_imports(path)]
    assert not wrong, "\n".join(wrong)


def test_the_check_reports_an_upward_import(tmp_path):
    """The check itself: a method module importing the run machinery, at the top or in a function, is reported."""
    root = tmp_path / "mrtpo"
    for layer in ("method", "runs", "analysis"):
        (root / layer).mkdir(parents=True)
        (root / layer / "__init__.py").write_text("")
    (root / "runs" / "runner.py").write_text("")
    (root / "analysis" / "stats.py").write_text("")
    bad = root / "method" / "bad.py"
    bad.write_text("from mrtpo.runs.runner import run\n\ndef f():\n    from ..analysis import stats\n")
    found = upward_imports(bad, root)
    assert len(found) == 2 and "mrtpo.runs.runner" in found[0] and "mrtpo.analysis.stats" in found[1], found


def test_no_import_circle():
    graph = {dotted(p): sorted({m for _, m in imports(p)}) for p in modules()}
    done: set[str] = set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            pytest.fail("import circle: " + " -> ".join(stack[stack.index(node):] + [node]))
        if node in done or node not in graph:
            return
        for nxt in graph[node]:
            visit(nxt, stack + [node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])


def test_no_module_over_400_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_task_is_looked_up_only_where_a_user_names_it(path):
    rel = path.relative_to(PACKAGE).as_posix()
    if rel.startswith(LOOKUPS):
        return
    calls = [n.lineno for n in ast.walk(ast.parse(path.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "get_task"]
    assert not calls, f"{rel} looks a task up by name at lines {calls}: take the Task object instead"
