"""GRPO seconds per step and where they go, on real train tasks: metrics/bench_grpo.json.

    python scripts/bench_grpo.py --tasks 4 --steps 4          # make bench-grpo

The untrained tiny model never writes valid JSON, so nothing would reach a container. This benchmark first
gives it a quick warm start (all weights, a few dozen steps) on one compact reply per task whose keystrokes
are the task's own solution script, plus a do-nothing reply (`ls`), in the exact first-turn prompt GRPO
uses; then it runs real GRPO steps (termagent.train.grpo.train_grpo, the stage's code) on those tasks with
containers, tmux and the tasks' verifiers, and writes the step timing (generation, containers, verifier,
backward) and what the rollouts earned. It is a measurement, not a model: nothing it trains is kept.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

import click
import torch

from termagent import atomic
from termagent.agent.config import AgentConfig
from termagent.models.artifact import write_start
from termagent.params import load_params, section
from termagent.sandbox import Sandbox
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.index import tasks_in_split
from termagent.train.common import environment, fit_completions, load_model, load_tokenizer
from termagent.train.grpo import GRPOParams, GRPOPaths, train_grpo
from termagent.train.single_turn import EnvConfig, SingleTurnEnv


def compact_reply(keystrokes: str) -> str:
    return json.dumps({"analysis": "", "plan": "", "commands": [{"keystrokes": keystrokes, "duration": 1.0}]},
                      separators=(",", ":"))


def solution_keystrokes(task) -> str:
    lines = [ln for ln in task.solve_script.read_text().splitlines()
             if ln.strip() and not ln.startswith("#!") and not ln.startswith("set -")]
    return "\n".join(lines) + "\n"


def warm_start(base: Path, out: Path, env: SingleTurnEnv, tasks, steps: int, lr: float) -> float:
    tokenizer = load_tokenizer(base)
    torch.manual_seed(0)
    model = load_model(base)
    examples = []
    for task in tasks:
        prompt = tokenizer.apply_chat_template(env.prompt(task.id), add_generation_prompt=True, tokenize=True,
                                               return_dict=True)["input_ids"]
        for keys in (solution_keystrokes(task), "ls\n"):
            target = tokenizer(compact_reply(keys) + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
            examples.append((prompt, target))
    loss = fit_completions(model, examples, pad_token_id=tokenizer.pad_token_id, steps=steps, lr=lr)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return float(loss)


@click.command()
@click.option("--params", "params_file", default="params.yaml", show_default=True)
@click.option("--tasks", "n_tasks", default=4, show_default=True, help="train tasks (shortest solutions first)")
@click.option("--steps", default=4, show_default=True, help="GRPO steps")
@click.option("--warm-steps", default=40, show_default=True)
@click.option("--max-completion", default=160, show_default=True)
@click.option("--out", default="metrics/bench_grpo.json", show_default=True)
def main(params_file: str, n_tasks: int, steps: int, warm_steps: int, max_completion: int, out: str) -> None:
    params = load_params(params_file)
    config = section(params, "grpo", GRPOParams, file=params_file)
    agent = section(params, "agent", AgentConfig, file=params_file)
    sandbox_params = section(params, "sandbox", SandboxParams, file=params_file)
    tasks = [t for t in tasks_in_split("data/tasks.json", "train") if t.solve_script and t.solve_script.is_file()]
    tasks = sorted(tasks, key=lambda t: (len(t.solve_script.read_text()), t.id))[:n_tasks]
    config = dataclasses.replace(config, use_vllm=False, max_steps=steps, trl={**config.trl, "save_steps": steps},
                                 max_completion_length=max_completion, max_tasks=0, lora=dataclasses.replace(
                                     config.lora, r=16, alpha=32))
    image = json.loads(Path("data/image.json").read_text())["image"]
    sandbox_config = dataclasses.replace(sandbox_params.sandbox_config(image),
                                         warm_pool=max(sandbox_params.warm_pool, config.generation_batch_size))
    env_config = EnvConfig(pane_width=agent.pane_width, pane_height=agent.pane_height,
                           max_observation_bytes=agent.max_observation_bytes,
                           deadline_margin_sec=agent.deadline_margin_sec)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-") as tmp, Sandbox(sandbox_config) as sandbox:
        tmp = Path(tmp)
        env = SingleTurnEnv(sandbox, tasks, env_config)
        env.probe_screens(progress=False)
        t0 = time.monotonic()
        warm_loss = warm_start(Path("models/base"), tmp / "warm", env, tasks, warm_steps, lr=1e-2)
        warm_s = time.monotonic() - t0
        write_start(tmp / "start", base_dir=tmp / "warm", adapter=False)  # GRPO from the warm-started model
        paths = GRPOPaths(warmup=tmp / "start", out=tmp / "grpo", rollouts_dir=tmp / "rollouts",
                          checkpoints=tmp / "ckpt", metrics_dir=tmp / "metrics")
        metrics = train_grpo(config, paths, tasks=tasks, sandbox=sandbox, env_config=env_config)
        timing = json.loads((paths.metrics_dir / "timing.json").read_text())
    keep = ("n_rollouts", "n_infra_failures", "valid_json_rate", "script_ok_rate", "verifier_pass_rate",
            "verifier_mean", "reward_mean", "groups", "groups_nonzero_std", "adapter_delta_l2", "reward_first_step",
            "reward_last_step")
    result = {
        "tasks": [t.id for t in tasks],
        "config": {"num_generations": config.num_generations, "generation_batch": config.generation_batch_size,
                   "max_completion_length": max_completion, "steps": steps, "concurrency": config.concurrency},
        "warm_start": {"steps": warm_steps, "final_loss": round(warm_loss, 4), "wall_s": round(warm_s, 1)},
        "seconds_per_step": timing["mean_s"].get("step"),
        "timing": timing,
        "rollouts": {k: metrics[k] for k in keep},
        "environment": environment(),
    }
    atomic.write_json(out, result)
    click.echo(f"{out}: {result['seconds_per_step']:.1f} s/step; " + ", ".join(
        f"{k} {v:.2f}" for k, v in timing["mean_s"].items()) + f"; rollouts {result['rollouts']}")


if __name__ == "__main__":
    main()
