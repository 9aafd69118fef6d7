"""`termagent tasks ...`: validate task directories, write the index, import Terminal-Bench 1 tasks.
`termagent tasks check` runs containers, so it lives with the sandbox (termagent.sandbox.check) and the
`termagent` command adds it to this group: this package never imports the sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

import click

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
