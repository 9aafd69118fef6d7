"""DVC stage `datasets` (this file is not named datasets.py: a script directory on sys.path named so would
shadow the Hugging Face `datasets` package that TRL imports): the six training datasets from the GRPO rollouts,
in data/datasets.

    python stages/build_datasets.py                        # what `dvc repro datasets` runs
    python stages/build_datasets.py --rollouts /tmp/synthetic.jsonl --out /tmp/datasets

Reads params: datasets (all keys), judge (all keys), tasks.dirs.
Writes data/datasets/{sft,dpo,dpo_filtered,api_sft,prm_sequence,prm_step}.jsonl, the removed-pairs
sidecar dpo_filtered.removed.jsonl, and summary.json (counts, malformed lines, judge and version).
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.datasets import BuildConfig, build_datasets
from termagent.judge import JudgeConfig, JudgeError, judge_from_config, load_task_contexts
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.command()
@profile_option
@click.option("--rollouts", default="data/rollouts/grpo/rollouts.jsonl", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", default="data/datasets", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, rollouts: Path, out: Path) -> None:
    p = read_sections(params_file, profile, datasets=BuildConfig, judge=JudgeConfig, tasks=TasksConfig)
    try:
        summary = build_datasets(rollouts, out, judge_from_config(p.judge), load_task_contexts(p.tasks.dirs),
                                 p.datasets)
    except JudgeError as e:
        raise click.ClickException(str(e)) from e
    counts = " ".join(f"{k.removesuffix('.jsonl')}={v}" for k, v in summary.counts.items())
    click.echo(f"{out}: {counts} (judge {summary.judge}, {summary.input['n_malformed']} malformed lines, "
               f"{summary.wall_s:.1f} s)")


if __name__ == "__main__":
    main()
