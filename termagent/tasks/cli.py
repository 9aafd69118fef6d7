"""`termagent tasks ...`: validate task directories, write the index, import Terminal-Bench 1 tasks,
and check them in the sandbox with the oracle and nop agents (`check`: a task is ok when the oracle
earns reward 1.0 and nop earns 0.0). Commands import what they run inside their bodies, so validate /
index / import-tb1 work without the Docker stack."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from termagent import atomic
from termagent.tasks.index import TasksConfig, index_tasks
from termagent.tasks.load import find_task_dirs, read_task
from termagent.tasks.model import TaskError


@click.group()
def tasks() -> None:
    """Task directories: Harbor layout (task.toml) and Terminal-Bench 1 (task.yaml)."""


@tasks.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--quiet", "-q", is_flag=True, help="Print problems only, no warnings or ok lines.")
def validate(paths: tuple[Path, ...], quiet: bool) -> None:
    """Check task directories (or directories of them); print every problem, exit 1 if any."""
    try:
        task_dirs = find_task_dirs(list(paths))
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    n_bad = 0
    seen: dict[str, Path] = {}
    for task_dir in task_dirs:
        result = read_task(task_dir)
        problems = list(result.problems)
        if result.task is not None:
            if result.task.id in seen:
                problems.append(f"duplicate task id {result.task.id!r} (also {seen[result.task.id]})")
            seen.setdefault(result.task.id, task_dir)
        if problems:
            n_bad += 1
            click.echo(f"FAIL {task_dir}")
            for p in problems:
                click.echo(f"  error: {p}")
        elif not quiet:
            click.echo(f"ok   {task_dir} ({result.layout}, id {result.task.id})")
        if not quiet:
            for w in result.warnings:
                click.echo(f"  warning: {w}")
    click.echo(f"{len(task_dirs) - n_bad}/{len(task_dirs)} task directories valid", err=True)
    sys.exit(1 if n_bad else 0)


@tasks.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--eval-fraction", default=TasksConfig.eval_fraction, show_default=True, type=float)
@click.option("--split-seed", default=TasksConfig.split_seed, show_default=True, type=int)
@click.option("--stratify-by", default=TasksConfig.stratify_by, show_default=True,
              type=click.Choice(["difficulty", "category", "none"]))
def index(paths: tuple[Path, ...], out: Path, eval_fraction: float, split_seed: int, stratify_by: str) -> None:
    """Write the task index (id, hash, layout, split, metadata, path) of the tasks under PATHS.
    The DVC stage `tasks` runs the same `index_tasks` with params.yaml's `tasks:` section."""
    try:
        cfg = TasksConfig(dirs=[str(p) for p in paths], eval_fraction=eval_fraction, split_seed=split_seed,
                          stratify_by=None if stratify_by == "none" else stratify_by)  # type: ignore[arg-type]
        lines = index_tasks(cfg, out, root=Path.cwd())
    except (TaskError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    click.echo("\n".join(lines))


@tasks.command("import-tb1")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory that receives one Harbor task directory per TB1 task.")
@click.option("--overwrite", is_flag=True, help="Replace task directories that already exist in --out.")
def import_tb1(sources: tuple[Path, ...], out_dir: Path, overwrite: bool) -> None:
    """Convert Terminal-Bench 1 tasks (task dirs or dirs of them) to Harbor's layout in --out."""
    from termagent.tasks.tb1_import import import_tb1_task

    try:
        task_dirs = find_task_dirs(list(sources))
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    failures = 0
    for task_dir in task_dirs:
        try:
            dest = import_tb1_task(task_dir, out_dir, overwrite=overwrite)
            click.echo(f"ok   {task_dir} -> {dest}")
        except (TaskError, FileExistsError) as e:
            failures += 1
            click.echo(f"FAIL {e}")
    sys.exit(1 if failures else 0)


@tasks.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-task results here (a JSON list).")
@click.option("--concurrency", "-j", type=click.IntRange(min=1), default=None,
              help="Containers at once (default: sandbox.concurrency of params.yaml).")
@click.option("--params", "params_file", default="params.yaml", show_default=True,
              help="Where the sandbox: section is read from (defaults apply when absent).")
def check(paths: tuple[Path, ...], json_out: Path | None, concurrency: int | None, params_file: str) -> None:
    """Run the oracle and nop agents on task directories (or directories of them); exit 0 only if every
    task is ok (oracle reward 1.0, nop reward 0.0)."""
    import logging

    from rich.console import Console
    from rich.table import Table

    from termagent.params import read_sections
    from termagent.sandbox import Sandbox, SandboxParams, run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent
    from termagent.sandbox.errors import SandboxError
    from termagent.sandbox.image import ensure_base_image
    from termagent.tasks.load import discover_tasks

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        found = discover_tasks(list(paths))
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    params = read_sections(params_file, missing_ok=True, sandbox=SandboxParams).sandbox
    try:
        base = ensure_base_image(params.base_recipe())
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    sandbox = Sandbox(params.sandbox_config(base.tag))
    oracle, nop = OracleAgent(), NopAgent()
    specs = [(task, agent, 0) for task in found for agent in (oracle, nop)]
    results = run_trials(sandbox, specs, concurrency=concurrency, progress=sys.stderr.isatty(),
                         description="oracle + nop")
    entries = [check_entry(task, results[2 * i], results[2 * i + 1]) for i, task in enumerate(found)]

    table = Table(title=f"tasks check: {sum(e['ok'] for e in entries)}/{len(entries)} ok")
    for column in ("task", "layout", "oracle", "nop", "ok", "note"):
        table.add_column(column)
    for e in entries:
        notes = [f"{agent}: {e[agent]['error']['class']}: {e[agent]['error']['message'].splitlines()[0][:80]}"
                 for agent in ("oracle", "nop") if e[agent]["error"]]
        if e["image"].get("substituted_from"):
            notes.append(f"FROM {e['image']['substituted_from']} -> base")
        table.add_row(e["task_id"], e["layout"], _reward(e["oracle"]), _reward(e["nop"]),
                      "[green]ok[/]" if e["ok"] else "[red]FAIL[/]", "; ".join(notes))
    Console(width=max(120, Console().width)).print(table)
    if json_out:
        atomic.write_json(json_out, entries)
    if not all(e["ok"] for e in entries):
        sys.exit(1)


def check_entry(task, oracle, nop) -> dict:
    """One task's `tasks check` record from its oracle and nop TrialResults."""
    def agent_view(r) -> dict:
        return {"reward": r.reward, "rewards": r.rewards, "error": r.error, "passed": r.passed, "total": r.total}

    return {"task_id": task.id, "layout": task.layout, "oracle": agent_view(oracle), "nop": agent_view(nop),
            "ok": oracle.reward == 1.0 and nop.reward == 0.0,
            "image": oracle.image, "timings": {"oracle": oracle.timings, "nop": nop.timings}}


def _reward(view: dict) -> str:
    if view["reward"] is None:
        return "-"
    tests = f" ({view['passed']}/{view['total']})" if view["total"] else ""
    return f"{view['reward']:g}{tests}"
