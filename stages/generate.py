"""DVC stage `generate`: write the task-family instances of params `generate:` to data/generated/.

    python stages/generate.py --out data/generated          # what `dvc repro generate` runs
    python stages/generate.py --out /tmp/gen --profile h100

Reads params: generate.families, generate.instances, generate.seed, generate.rung_weights. Same params -> same
bytes.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.params import profile_option, read_sections
from termagent.tasks.families.instances import GenerateConfig, generate_all


@click.command()
@profile_option
@click.option("--out", default="data/generated", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, out: Path) -> None:
    cfg = read_sections(params_file, profile, generate=GenerateConfig).generate
    summary = generate_all(cfg, out)
    click.echo(f"{out}: {summary['instances']} tasks in {summary['families']} families (seed {summary['seed']})")
    for family, counts in summary["by_family"].items():
        click.echo(f"  {family:>16}: " + "  ".join(f"{d} {n:>3}" for d, n in counts.items()))


if __name__ == "__main__":
    main()
