"""`termagent datasets build|synth`: the six training datasets from rollouts, and synthetic rollouts.

    termagent datasets synth --tasks data/tasks --n 17472 --out data/rollouts/synthetic.jsonl
    termagent datasets build --rollouts data/rollouts/grpo/rollouts.jsonl --out data/datasets [--params FILE]

`build` is the `datasets` stage's command (stages/build_datasets.py runs it): its knobs are params.yaml's
`datasets` and `judge` sections, read once, so the stage and the command cannot disagree.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from termagent.datasets.build import BuildConfig, build_datasets
from termagent.datasets.synthetic import SynthConfig, generate_rollouts
from termagent.judge import JudgeConfig, JudgeError, judge_from_config, load_task_contexts
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.group()
def datasets() -> None:
    """Training datasets from rollouts (sft, dpo, dpo_filtered, api_sft, prm_sequence, prm_step)."""


@datasets.command()
@profile_option
@click.option("--rollouts", default="data/rollouts/grpo/rollouts.jsonl", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--sampled", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A sample stage's rollouts.jsonl: rft_sft.jsonl (verified passes) and dpo_turns.jsonl (a pass and a "
                   "fail of one task at the turn where they part).")
@click.option("--out", default="data/datasets", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--tasks", "tasks_dirs", type=click.Path(exists=True, file_okay=False, path_type=Path), multiple=True,
              help="Task directory or directory of tasks (repeatable; default: params tasks.dirs).")
@click.option("--progress/--no-progress", default=True)
def build(params_file: Path, profile: str | None, rollouts: Path, sampled: Path | None, out: Path,
          tasks_dirs: tuple[Path, ...], progress: bool) -> None:
    """Write sft/dpo/dpo_filtered/api_sft/prm_sequence/prm_step.jsonl and summary.json under OUT. The knobs are
    params sections `datasets` and `judge` (the `datasets` stage runs this command: stages/build_datasets.py)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    p = read_sections(params_file, profile, missing_ok=True, datasets=BuildConfig, judge=JudgeConfig,
                      tasks=TasksConfig)
    try:
        summary = build_datasets(rollouts, out, judge_from_config(p.judge),
                                 load_task_contexts(list(tasks_dirs) or p.tasks.dirs), p.datasets, progress=progress)
    except JudgeError as e:
        raise click.ClickException(str(e)) from e
    if sampled is not None:
        from termagent.datasets.trajectories import write_sampled

        summary.counts.update(write_sampled(sampled, out, p.datasets.rft_per_task, p.datasets.turn_pairs_per_task))
    counts = " ".join(f"{k.removesuffix('.jsonl')}={v}" for k, v in summary.counts.items())
    click.echo(f"{out}: {counts} (judge {summary.judge}, {summary.input['n_records']} rollouts, "
               f"{summary.input['n_malformed']} malformed lines, {summary.wall_s:.2f}s)")


@datasets.command()
@click.option("--tasks", "tasks_dirs", type=click.Path(exists=True, file_okay=False, path_type=Path),
              multiple=True, required=True)
@click.option("--n", type=int, default=SynthConfig.n, show_default=True, help="rollouts to write")
@click.option("--generations", type=int, default=SynthConfig.generations, show_default=True)
@click.option("--tasks-per-step", type=int, default=SynthConfig.tasks_per_step, show_default=True)
@click.option("--seed", type=int, default=SynthConfig.seed, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def synth(tasks_dirs: tuple[Path, ...], n: int, generations: int, tasks_per_step: int, seed: int, out: Path) -> None:
    """Synthetic rollouts.jsonl in the GRPO schema, from the tasks' reference solutions."""
    tasks = list(load_task_contexts(list(tasks_dirs)).values())
    written = generate_rollouts(tasks, out, SynthConfig(n=n, generations=generations,
                                                        tasks_per_step=tasks_per_step, seed=seed))
    click.echo(json.dumps({"out": str(out), "rollouts": written, "tasks": len(tasks)}))
