"""DVC stage `tasks`: validate every task under params `tasks.dirs`, split them into train and the
held-out groups eval / eval_id / eval_ood,
and write the index data/tasks.json (id, hash, layout, split, path, metadata).

    python stages/tasks.py --out data/tasks.json       # what `dvc repro tasks` runs
    python stages/tasks.py --out /tmp/tasks.json --profile h100

Reads params: tasks.dirs, tasks.eval_fraction, tasks.split_seed, tasks.stratify_by, tasks.id_fraction,
tasks.id_min_per_family, tasks.ood_families.
`termagent tasks index PATHS` runs the same `index_tasks` with its flags instead of params.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig, index_tasks
from termagent.tasks.model import TaskError


@click.command()
@profile_option
@click.option("--out", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, out: Path) -> None:
    cfg = read_sections(params_file, profile, tasks=TasksConfig).tasks
    try:
        lines = index_tasks(cfg, out, root=Path.cwd())  # index paths are relative to the repository root
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
