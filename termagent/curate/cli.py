"""`termagent curate`: the multi-turn RL task list from rollout statistics and a judge's analysis. It is the
`curate` stage's command (stages/curate.py runs it): its knobs are params.yaml's `curate` and `judge` sections.

    termagent curate --rates data/sample/dpo/rates.json --index data/tasks.json --out data/curated
    termagent curate --rollouts r.jsonl --tasks my/tasks --eval-ids a,b --out /tmp/curated --params my.yaml

Eval tasks come from the task index's `split` (or --eval-ids): curation never selects them, nor a training
task that near-duplicates one.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from termagent.curate.run import run_curation
from termagent.curate.select import CurateConfig
from termagent.judge import JudgeConfig, JudgeError, judge_from_config
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.command()
@profile_option
@click.option("--rollouts", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rank by these rollouts' rewards (when no --rates).")
@click.option("--rates", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A sample stage's rates.json: rank by the measured solve rate, keep rates in "
                   "(curate.min_rate, curate.max_rate).")
@click.option("--index", default="data/tasks.json", show_default=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The task index whose `split` names the eval tasks.")
@click.option("--out", default="data/curated", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--tasks", "tasks_dirs", type=click.Path(exists=True, file_okay=False, path_type=Path), multiple=True,
              help="Task directory or directory of tasks (repeatable; default: params tasks.dirs).")
@click.option("--eval-ids", default=None, help="Comma-separated eval task ids, instead of --index.")
def curate(params_file: Path, profile: str | None, rollouts: Path | None, rates: Path | None, index: Path, out: Path,
           tasks_dirs: tuple[Path, ...], eval_ids: str | None) -> None:
    """Write rl_tasks_mt.json, task_analysis.json, contamination.json and skill histograms under OUT."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    p = read_sections(params_file, profile, missing_ok=True, curate=CurateConfig, judge=JudgeConfig,
                      tasks=TasksConfig)
    if rollouts is None and rates is None:
        raise click.ClickException("give --rates (a sample stage's rates.json) or --rollouts")
    if not eval_ids and not index.is_file():
        raise click.ClickException(f"{index}: no task index (run `dvc repro tasks`, or pass --eval-ids)")
    try:
        summary = run_curation(rollouts, list(tasks_dirs) or [Path(d) for d in p.tasks.dirs], out,
                               judge_from_config(p.judge), p.curate, index=None if eval_ids else index,
                               eval_ids=eval_ids, rates=rates)
    except (JudgeError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(json.dumps(summary))
