"""DVC stage `tasks`: validate every task under params `tasks.dirs`, split them into train and the
held-out groups eval / eval_id / eval_ood,
and write the index data/tasks.json (id, hash, layout, split, path, metadata).

    python stages/tasks.py                 # what `dvc repro tasks` runs
    python stages/tasks.py --out /tmp/tasks.json --params profiles/h100.yaml

Reads params: tasks.dirs, tasks.eval_fraction, tasks.split_seed, tasks.stratify_by, tasks.id_fraction,
tasks.ood_families.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.params import ParamsError, load_params, section
from termagent.tasks.index import TasksConfig, build_index, write_index
from termagent.tasks.load import discover_tasks
from termagent.tasks.model import TaskError


@click.command()
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, out: Path) -> None:
    try:
        cfg = section(load_params(params_file), "tasks", TasksConfig, file=str(params_file))
    except ParamsError as e:
        raise click.ClickException(str(e)) from e
    try:
        tasks = discover_tasks(cfg.dirs)
    except TaskError as e:
        raise click.ClickException(str(e)) from e

    # Paths in the index are relative to the repository root (this stage runs there).
    index = build_index(tasks, cfg.eval_fraction, cfg.split_seed, cfg.stratify_by, root=Path.cwd(),
                        id_fraction=cfg.id_fraction, ood_families=cfg.ood_families)
    write_index(index, out)
    groups = ("train", "eval", "eval_id", "eval_ood")
    by_difficulty: dict[str, dict[str, int]] = {}
    for record in index["tasks"]:
        counts = by_difficulty.setdefault(str(record["difficulty"]), dict.fromkeys(groups, 0))
        counts[record["split"]] += 1
    click.echo(f"{out}: {len(tasks)} tasks, " + ", ".join(f"{g} {index['counts'].get(g, 0)}" for g in groups))
    for difficulty, counts in sorted(by_difficulty.items()):
        click.echo(f"  {difficulty:>8}: " + "  ".join(f"{g} {counts[g]:>3}" for g in groups))


if __name__ == "__main__":
    main()
