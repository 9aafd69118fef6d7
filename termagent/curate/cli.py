"""`termagent curate`: the multi-turn RL task list from rollout statistics and a judge's analysis.

    termagent curate --rollouts data/rollouts/grpo/rollouts.jsonl --tasks data/tasks \
        --index data/tasks.json --out data/curated --judge rules
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from termagent.curate.contamination import ContaminationConfig
from termagent.curate.run import run_curation
from termagent.curate.select import CurateConfig
from termagent.datasets.cli import judge_from_options, judge_options
from termagent.tasks.index import TasksConfig


@click.command()
@click.option("--rollouts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--tasks", "tasks_dirs", type=click.Path(exists=True, file_okay=False, path_type=Path),
              multiple=True, required=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--index", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="task index (data/tasks.json) whose `split` names the eval tasks")
@click.option("--eval-ids", default=None, help="comma-separated eval task ids (overrides --index)")
@click.option("--eval-fraction", type=float, default=TasksConfig.eval_fraction, show_default=True,
              help="without --index/--eval-ids: the split rule of termagent.tasks.split")
@click.option("--split-seed", type=int, default=TasksConfig.split_seed, show_default=True)
@click.option("--target-size", type=int, default=CurateConfig.target_size, show_default=True,
              help="0: every eligible task")
@click.option("--min-quality", type=int, default=CurateConfig.min_quality, show_default=True)
@click.option("--drop-difficulty", multiple=True, default=tuple(CurateConfig().drop_difficulties), show_default=True)
@click.option("--seed", type=int, default=CurateConfig.seed, show_default=True)
@click.option("--contamination-threshold", type=float, default=ContaminationConfig.threshold, show_default=True)
@judge_options
def curate(rollouts: Path, tasks_dirs: tuple[Path, ...], out: Path, index: Path | None, eval_ids: str | None,
           eval_fraction: float, split_seed: int, target_size: int, min_quality: int,
           drop_difficulty: tuple[str, ...], seed: int, contamination_threshold: float, **judge_kw) -> None:
    """Write rl_tasks_mt.json, task_analysis.json, contamination.json and skill histograms under OUT."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    config = CurateConfig(target_size=target_size, min_quality=min_quality,
                          drop_difficulties=[d for d in drop_difficulty if d != "none"], seed=seed,
                          contamination=ContaminationConfig(threshold=contamination_threshold))
    summary = run_curation(rollouts, list(tasks_dirs), out, judge_from_options(**judge_kw), config, index,
                           eval_ids, eval_fraction, split_seed)
    click.echo(json.dumps(summary))
