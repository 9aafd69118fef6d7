"""The package's layering rules (docs/design.md#principles), read from the code with `ast`: every import
counts, lazy ones inside functions included.

- no two termagent modules import each other, directly or around a loop (package `__init__.py` files, which
  only hand names on, are left out: importing `termagent.x.y` through them is not a dependency on them);
- `termagent.tasks` never imports `termagent.sandbox` (the sandbox runs tasks, not the other way round);
- `termagent/policy/base.py` imports no backend; `termagent.models` imports no policy, eval or training code.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "termagent"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Module names `path` imports; for `from X import y`, X.y when that is a module, else X."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{module}" if module else base
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if is_module(f"{module}.{alias.name}") else module)
    return {m for m in found if m == "termagent" or m.startswith("termagent.")}


def is_module(name: str) -> bool:
    base = REPO.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    """module -> the modules it imports, package faces (__init__.py) left out on both ends."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    return {name: {m for m in imported(path) if m in modules and m != name} for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert cycles(graph()) == []


def test_tasks_never_import_the_sandbox():
    offenders = {str(p.relative_to(REPO)): sorted(m for m in imported(p) if m.startswith("termagent.sandbox"))
                 for p in (PACKAGE / "tasks").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_policy_interface_knows_no_backend_and_models_know_no_policy():
    edges = graph()
    assert not {m for m in edges["termagent.policy.base"] if m.startswith("termagent.policy.")}
    higher = ("termagent.policy", "termagent.evaluate", "termagent.train", "termagent.agent")
    models = {name: sorted(m for m in deps if m.startswith(higher))
              for name, deps in edges.items() if name.startswith("termagent.models")}
    assert {k: v for k, v in models.items() if v} == {}
    assert "termagent.models.tiny" not in edges["termagent.models.templates"]
