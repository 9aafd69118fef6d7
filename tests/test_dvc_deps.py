"""Stage deps that cannot go stale: every termagent module a stage's script imports, directly or
transitively, lazily inside a function or not, is covered by that stage's `deps` in dvc.yaml.

The script is read from each stage's `cmd` (`python stages/<name>.py ...` or `python -m <module>`), so a
stage another room adds is checked with no change here. Imports are found with `ast` (every
`import` / `from ... import` node anywhere in the module, relative ones resolved); importing
`termagent.a.b` also runs `termagent/__init__.py` and `termagent/a/__init__.py`, so those count too.
A dep covers a module when it names the file or a directory above it (`termagent/sandbox` covers
everything under it).

    python -m pytest tests/test_dvc_deps.py -q

The stages are DVC's own expansion of dvc.yaml (`foreach` included), not the YAML as written.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def expanded_stages() -> dict[str, dict]:
    """Every stage as DVC runs it (`foreach` expanded, `${...}` resolved): name -> {cmd, deps}, read through
    DVC's own index, so a stage generated from params is checked like a written one."""
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        return {stage.addressing.split(":")[-1]: {"cmd": stage.cmd, "deps": [d.def_path for d in stage.deps]}
                for stage in repo.index.stages if stage.cmd}


STAGES = expanded_stages()


def module_file(name: str) -> Path | None:
    """The repository file of module `name` (a package's __init__.py), or None if it is not termagent's."""
    if not (name == "termagent" or name.startswith("termagent.")):
        return None
    base = REPO.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module name `path` imports (and, for `from X import y`, X.y in case y is a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path) if path.is_relative_to(REPO / "termagent") else ""
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def transitive_files(script: Path) -> set[Path]:
    """The termagent files `script` runs when imported, following every import."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        for name in imports_of(todo.pop()):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # the packages on the way run their __init__.py
                f = module_file(".".join(parts[:i]))
                if f is not None and f not in seen:
                    seen.add(f)
                    todo.append(f)
    return seen


def stage_script(cmd: str | list) -> Path:
    cmd = cmd if isinstance(cmd, str) else " ".join(cmd)
    argv = shlex.split(cmd.split("&&")[-1])
    assert argv and re.fullmatch(r"(.*/)?python3?", argv[0]), f"cmd does not run python: {cmd!r}"
    if argv[1] == "-m":
        f = module_file(argv[2])
        assert f is not None, f"cmd runs an unknown module: {cmd!r}"
        return f if f.name != "__init__.py" else f.parent / "__main__.py"
    return REPO / argv[1]


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(REPO)
    return any(rel == Path(d) or Path(d) in rel.parents for d in deps)


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_deps_cover_every_termagent_import(name):
    stage = STAGES[name]
    script = stage_script(stage["cmd"])
    deps = [str(d) for d in stage.get("deps", [])]
    assert covered(script, deps), f"{name}: deps miss its own script {script.relative_to(REPO)}"
    missing = sorted(str(f.relative_to(REPO)) for f in transitive_files(script) if not covered(f, deps))
    assert not missing, f"dvc.yaml stage {name}: deps miss {missing} (imported by {script.relative_to(REPO)})"


def test_the_import_walk_sees_lazy_imports_and_package_inits(tmp_path):
    script = tmp_path / "stage.py"
    script.write_text("def main():\n    from termagent.tasks.index import TasksConfig\n")
    files = {str(f.relative_to(REPO)) for f in transitive_files(script)}
    assert {"termagent/__init__.py", "termagent/tasks/__init__.py", "termagent/tasks/index.py",
            "termagent/tasks/load.py", "termagent/atomic.py"} <= files
    assert not covered(REPO / "termagent/tasks/index.py", ["termagent/tasks/load.py"])
    assert covered(REPO / "termagent/tasks/index.py", ["termagent/tasks"])


def test_every_termagent_import_names_a_module_that_exists():
    """A lazy import of a moved module (`from termagent.sandbox.runner import ...` inside a function) fails
    only when that function runs — and the deps walk above would silently skip it. Catch it here."""
    missing = []
    for root in ("termagent", "stages", "scripts", "tests"):
        for path in sorted((REPO / root).rglob("*.py")):
            if "fixtures" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                named = isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("termagent")
                if named and module_file(node.module) is None:
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module}")
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)
