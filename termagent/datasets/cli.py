"""`termagent datasets build|synth`: the six training datasets from rollouts, and synthetic rollouts.

    termagent datasets synth --tasks data/tasks --n 17472 --out data/rollouts/synthetic.jsonl
    termagent datasets build --rollouts data/rollouts/grpo/rollouts.jsonl --tasks data/tasks \
        --out data/datasets --judge rules
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from termagent.datasets.build import BuildConfig, build_datasets
from termagent.datasets.synthetic import SynthConfig, generate_rollouts
from termagent.judge import JudgeConfig, OpenAIJudgeConfig, load_task_contexts, make_judge


def judge_options(f):
    """The options that pick and configure a judge (shared with `termagent curate`)."""
    options = [
        click.option("--judge", "judge_name", type=click.Choice(["rules", "openai"]), default=JudgeConfig.backend,
                     show_default=True, help="rules: offline, deterministic; openai: an OpenAI-compatible model"),
        click.option("--judge-base-url", default=OpenAIJudgeConfig.base_url, show_default=True),
        click.option("--judge-model", default=OpenAIJudgeConfig.model, show_default=True),
        click.option("--judge-api-key-env", default=OpenAIJudgeConfig.api_key_env, show_default=True,
                     help="NAME of the environment variable holding the API key"),
        click.option("--judge-concurrency", type=int, default=OpenAIJudgeConfig.concurrency, show_default=True),
        click.option("--judge-cache-dir", default=OpenAIJudgeConfig.cache_dir, show_default=True),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def judge_from_options(judge_name, judge_base_url, judge_model, judge_api_key_env, judge_concurrency,
                       judge_cache_dir, **_):
    config = OpenAIJudgeConfig(base_url=judge_base_url, model=judge_model, api_key_env=judge_api_key_env,
                               concurrency=judge_concurrency, cache_dir=judge_cache_dir)
    return make_judge(judge_name, config)


@click.group()
def datasets() -> None:
    """Training datasets from rollouts (sft, dpo, dpo_filtered, api_sft, prm_sequence, prm_step)."""


@datasets.command()
@click.option("--rollouts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--tasks", "tasks_dirs", type=click.Path(exists=True, file_okay=False, path_type=Path),
              multiple=True, required=True, help="task directory or a directory of tasks (repeatable)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--pass-threshold", type=float, default=BuildConfig.pass_threshold, show_default=True)
@click.option("--fail-threshold", type=float, default=BuildConfig.fail_threshold, show_default=True)
@click.option("--pairs-per-group", type=int, default=BuildConfig.pairs_per_group, show_default=True)
@click.option("--api-max-candidates", type=int, default=BuildConfig.api_max_candidates, show_default=True)
@click.option("--prm-pairs", type=int, default=BuildConfig.prm_pairs, show_default=True)
@click.option("--progress/--no-progress", default=True)
@judge_options
def build(rollouts: Path, tasks_dirs: tuple[Path, ...], out: Path, pass_threshold: float, fail_threshold: float,
          pairs_per_group: int, api_max_candidates: int, prm_pairs: int, progress: bool, **judge_kw) -> None:
    """Write sft/dpo/dpo_filtered/api_sft/prm_sequence/prm_step.jsonl and summary.json under OUT."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    config = BuildConfig(pass_threshold=pass_threshold, fail_threshold=fail_threshold,
                         pairs_per_group=pairs_per_group, api_max_candidates=api_max_candidates,
                         prm_pairs=prm_pairs)
    summary = build_datasets(rollouts, out, judge_from_options(**judge_kw), load_task_contexts(list(tasks_dirs)),
                             config, progress=progress)
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
