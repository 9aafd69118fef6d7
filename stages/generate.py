"""DVC stage `generate`: write the task-family instances of params `generate:` to data/generated/.

    python stages/generate.py --out data/generated          # what `dvc repro generate` runs
    python stages/generate.py --out /tmp/gen --params profiles/h100.yaml

Reads params: generate.families, generate.instances, generate.seed. Same params -> same bytes.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.params import ParamsError, load_params, section
from termagent.tasks.families.instances import GenerateConfig, generate_all


@click.command()
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="data/generated", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, out: Path) -> None:
    try:
        cfg = section(load_params(params_file), "generate", GenerateConfig, file=str(params_file))
    except (ParamsError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    summary = generate_all(cfg, out)
    click.echo(f"{out}: {summary['instances']} tasks in {summary['families']} families (seed {summary['seed']})")
    for family, counts in summary["by_family"].items():
        click.echo(f"  {family:>16}: " + "  ".join(f"{d} {n:>3}" for d, n in counts.items()))


if __name__ == "__main__":
    main()
