"""Batched vs serialised in-process generation on eval@base's protocol, in one run.

    python scripts/bench_batching.py --out metrics/bench_batching.json          (make bench-batching)

Both modes run the same eval: the tasks of split eval.split (eval.max_tasks) x eval.attempts, the agent:
section's episode loop, models/base in-process, `--concurrency` trials at once (default 8). The only
difference is how the concurrent episodes share the model:
  serialised  SerializedPolicy over `generate`: one call at a time, every prompt prefilled whole
  cached      SerializedPolicy over the prefix-cached decoder (termagent.policy.kv): one call at a time,
              each episode's keys/values kept between its calls
  batched     BatchingPolicy over the prefix-cached decoder: the pending calls of concurrent episodes
              decode as one batch (what eval@base runs with eval.batched + eval.prefix_cache)
Measured per mode: wall time of run_local_eval (containers, terminals and verifiers included), trials/min,
generated tokens/s (completion tokens the backend generated / wall, counted at the backend so that trials
killed by their agent timeout count too), agent timeouts, and for batched the mean rows per batch.
The modes alternate (serialised first) and `--repeats` runs each that many times; the speed-up is the
ratio of the medians. A benchmark, not a test: the numbers go to the JSON, nothing asserts on them.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
from termagent import atomic
from termagent.agent import AgentConfig, TerminusAgent
from termagent.evaluate.config import EvalConfig
from termagent.evaluate.trajectories import run_local_eval
from termagent.models.artifact import ModelArtifact
from termagent.params import load_params, section
from termagent.policy import HFSpec, make_policy
from termagent.policy.batching import BatchingPolicy
from termagent.policy.shared import SerializedPolicy
from termagent.sandbox import Sandbox
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.index import tasks_in_split


def run_mode(mode: str, *, model: str, tasks, agent_cfg, sandbox_params, image: str, attempts: int,
             concurrency: int) -> dict:
    artifact = ModelArtifact.open(model)
    backend = make_policy(HFSpec(model_dir=artifact.base, adapter=artifact.adapter,
                                 prefix_cache=0 if mode == "serialised" else 2 * concurrency))
    generated = count_generated_tokens(backend)
    policy = BatchingPolicy(backend) if mode == "batched" else SerializedPolicy(backend)
    config = sandbox_params.sandbox_config(image)
    config.concurrency = concurrency
    with Sandbox(config) as sandbox:
        trajectories, wall_s = run_local_eval(sandbox, tasks, TerminusAgent(policy, agent_cfg), attempts=attempts,
                                              concurrency=concurrency, model=model, progress=False)
    # counted at the backend: a trial killed by its agent timeout returns no episode record, its tokens still count
    out_tokens, calls = generated["tokens"], generated["calls"]
    if mode == "batched":  # continuous batching decodes through the cached decoder, not generate_ids
        out_tokens, calls = policy.stats["completion_tokens"], policy.stats["rows"]
    errors = [(t.get("error") or {}).get("class") if isinstance(t.get("error"), dict) else t.get("error")
              for t in trajectories]
    result = {"wall_s": round(wall_s, 2), "trials": len(trajectories),
              "trials_per_min": round(60 * len(trajectories) / wall_s, 2),
              "completion_tokens": out_tokens, "tokens_per_s": round(out_tokens / wall_s, 1), "model_calls": calls,
              "turns_recorded": sum(t.get("n_turns") or 0 for t in trajectories),
              "agent_timeouts": errors.count("AgentTimeoutError"), "errors": sum(1 for e in errors if e),
              "infra_failures": sum(1 for t in trajectories if t.get("reward") is None)}
    if backend.prefix_cache:
        kv = backend.decoder.stats
        result.update(prefill_tokens=kv["prefill_tokens"], cached_prompt_tokens=kv["cached_tokens"])
    if mode == "batched":
        stats = policy.stats
        result.update(batches=stats["batches"], mean_rows_per_batch=round(stats["rows"] / max(1, stats["batches"]), 2),
                      max_rows=stats["max_rows"])
    policy.close()
    return result


def count_generated_tokens(backend) -> dict:
    """Count the completion tokens and rows the backend generates (both modes end in its generate_ids)."""
    counts = {"tokens": 0, "calls": 0}
    inner = backend.generate_ids

    def generate_ids(prompts, **kw):
        out = inner(prompts, **kw)
        counts["tokens"] += sum(g.completion_tokens for g in out)
        counts["calls"] += len(out)
        return out

    backend.generate_ids = generate_ids
    return counts


@click.command()
@click.option("--out", default="metrics/bench_batching.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--model", default="base", show_default=True)
@click.option("--params", "params_file", default="params.yaml", show_default=True)
@click.option("--concurrency", default=8, show_default=True)
@click.option("--attempts", type=int, default=None, help="Default: eval.attempts.")
@click.option("--max-tasks", type=int, default=None, help="Default: eval.max_tasks (0: the whole split).")
@click.option("--repeats", default=1, show_default=True)
@click.option("--modes", default="serialised,cached,batched", show_default=True,
              help="Comma-separated; the speed-ups are against the first.")
def main(out: Path, model: str, params_file: str, concurrency: int, attempts: int | None, max_tasks: int | None,
         repeats: int, modes: str) -> None:
    params = load_params(params_file)
    eval_cfg = section(params, "eval", EvalConfig, file=params_file)
    # Every turn decodes its whole budget: the random base's failed replies must not end its episodes after
    # agent.max_failed_replies, or the benchmark would measure three turns of decoding instead of max_turns.
    agent_cfg = replace(section(params, "agent", AgentConfig, file=params_file), max_failed_replies=None)
    sandbox_params = section(params, "sandbox", SandboxParams, file=params_file)
    attempts = attempts or eval_cfg.attempts
    max_tasks = eval_cfg.max_tasks if max_tasks is None else max_tasks
    tasks = sorted(tasks_in_split("data/tasks.json", eval_cfg.split), key=lambda t: t.id)
    tasks = tasks[:max_tasks] if max_tasks else tasks
    image = json.loads(Path("data/image.json").read_text())["image"]
    order = [m.strip() for m in modes.split(",") if m.strip()]
    if not order or set(order) - {"serialised", "cached", "batched"}:
        raise click.BadParameter(f"--modes: {modes!r} (choose from serialised, cached, batched)")
    runs: dict[str, list[dict]] = {mode: [] for mode in order}
    for repeat in range(repeats):
        for mode in order:
            t0 = time.monotonic()
            click.echo(f"[{repeat + 1}/{repeats}] {mode}: {len(tasks)} tasks x {attempts}, concurrency {concurrency}")
            runs[mode].append(run_mode(mode, model=model, tasks=tasks, agent_cfg=agent_cfg,
                                       sandbox_params=sandbox_params, image=image, attempts=attempts,
                                       concurrency=concurrency))
            click.echo(f"  {runs[mode][-1]}  ({time.monotonic() - t0:.0f} s)")

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    speedup = {mode: {key: round(median(mode, key) / median(order[0], key), 2)
                      for key in ("trials_per_min", "tokens_per_s")} for mode in order[1:]}
    report = {
        "command": "python scripts/bench_batching.py " + " ".join(sys.argv[1:]),
        "protocol": {"model": model, "split": eval_cfg.split, "tasks": len(tasks), "attempts": attempts,
                     "concurrency": concurrency, "agent": agent_cfg.to_dict()},
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "runs": runs,
        "median": {mode: {k: median(mode, k) for k in ("wall_s", "trials_per_min", "tokens_per_s")} for mode in runs},
        "speedup_vs": order[0],
        "speedup": speedup,
        "target_speedup": 2.5,
    }
    atomic.write_json(out, report)
    for mode, up in speedup.items():
        click.echo(f"{out}: {mode} vs {order[0]}: trials/min x{up['trials_per_min']}, tokens/s x{up['tokens_per_s']}")


if __name__ == "__main__":
    main()
