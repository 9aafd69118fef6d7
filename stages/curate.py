"""DVC stage `curate`: the multi-turn RL task list, in data/curated.

    python stages/curate.py --rates data/sample/dpo/rates.json --index data/tasks.json \
        --out data/curated                           # what `dvc repro curate` runs
    python stages/curate.py --rollouts /tmp/synthetic.jsonl --out /tmp/curated

Eval tasks come from the task index's `split` (data/tasks.json): curation never selects them, nor a
training task that near-duplicates one. Reads params: curate (all keys), judge (all keys), tasks.dirs.
Writes data/curated/{rl_tasks_mt.json, task_analysis.json, contamination.json, skill_histogram.json,
skill_histogram.png}.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from termagent.curate import CurateConfig
from termagent.curate.run import run_curation
from termagent.judge import JudgeConfig, JudgeError, judge_from_config
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.command()
@profile_option
@click.option("--rollouts", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rank by these rollouts' rewards (when no --rates).")
@click.option("--rates", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A sample stage's rates.json: rank by the measured solve rate, keep rates in (min_rate, max_rate).")
@click.option("--index", default="data/tasks.json", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", default="data/curated", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, rollouts: Path | None, rates: Path | None, index: Path,
         out: Path) -> None:
    p = read_sections(params_file, profile, curate=CurateConfig, judge=JudgeConfig, tasks=TasksConfig)
    try:
        summary = run_curation(rollouts, [Path(d) for d in p.tasks.dirs], out, judge_from_config(p.judge), p.curate,
                               index=index, rates=rates)
    except (JudgeError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(json.dumps(summary))


if __name__ == "__main__":
    main()
