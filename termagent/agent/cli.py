"""`termagent agent run TASK_DIR --policy SPEC`: one Terminus episode in a fresh container, verified.

    termagent agent run data/tasks/makefile-greet-build --policy replay:completions.jsonl --out runs/one
    termagent agent run TASK --policy openai:http://127.0.0.1:8000/v1 --model termagent --max-turns 20
    termagent agent run TASK --policy hf:models/base

Settings come from params.yaml's `agent:` and `sandbox:` sections (defaults when absent); flags override.
Writes OUT/trajectory.json (the episode record + reward, rewards, error of the trial) and prints the reward.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from termagent import atomic


@click.group()
def agent() -> None:
    """The Terminus agent: run episodes of a policy on a task."""


@agent.command()
@click.argument("task_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--policy", "policy_spec", required=True,
              help="hf:MODEL_DIR[,adapter=DIR] | openai:URL[,model=NAME] | replay:FILE")
@click.option("--model", default=None, help="Model name: the served name for openai, a label otherwise.")
@click.option("--max-turns", type=int, default=None, help="Override agent.max_turns.")
@click.option("--max-output-tokens", type=int, default=None, help="Override agent.max_output_tokens.")
@click.option("--temperature", type=float, default=None, help="Override agent.temperature.")
@click.option("--context-limit", type=int, default=None, help="Override the policy's context limit (tokens).")
@click.option("--attempt", type=int, default=0, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Directory for trajectory.json.")
@click.option("--params", "params_file", default="params.yaml", show_default=True,
              help="Where the agent: and sandbox: sections are read from (defaults apply when absent).")
def run(task_dir: Path, policy_spec: str, model: str | None, max_turns: int | None,
        max_output_tokens: int | None, temperature: float | None, context_limit: int | None, attempt: int,
        out_dir: Path, params_file: str) -> None:
    """Run one episode of TASK_DIR and write OUT/trajectory.json; print the reward."""
    from termagent.agent import AgentConfig, TerminusAgent
    from termagent.params import read_sections
    from termagent.policy import PolicyError, make_policy
    from termagent.sandbox import Sandbox, SandboxParams, run_trial
    from termagent.tasks.load import load_task
    from termagent.tasks.model import TaskError

    params = read_sections(params_file, missing_ok=True, agent=AgentConfig, sandbox=SandboxParams)
    sandbox_params = params.sandbox
    try:
        config = params.agent
        overrides = {"max_turns": max_turns, "max_output_tokens": max_output_tokens,
                     "temperature": temperature, "context_limit": context_limit}
        config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
        sandbox_config = sandbox_params.sandbox_config()
        task = load_task(task_dir)
    except (TaskError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if sandbox_config.base_image.split(":")[-1] != "latest":
        from termagent.sandbox.image import ensure_base_image

        ensure_base_image(sandbox_params.base_recipe())
    kind = policy_spec.partition(":")[0]
    try:
        policy = make_policy(policy_spec, **({"model": model} if kind == "openai" else {"name": model}))
    except PolicyError as e:
        raise click.ClickException(str(e)) from e

    with policy:
        result = run_trial(Sandbox(sandbox_config), task, TerminusAgent(policy, config), attempt=attempt)
    record = dict(result.agent_result or {"task_id": task.id, "attempt": attempt, "turns": [], "n_turns": 0})
    record.update(reward=result.reward, rewards=result.rewards, trial_error=result.error,
                  timings=result.timings, image=result.image, verifier_output=result.verifier_output)
    if result.error and not record.get("error"):
        record["error"] = result.error
    path = atomic.write_json(out_dir / "trajectory.json", record)
    episode_error = record.get("error")
    click.echo(f"{task.id}: ended by {record.get('ended_by')} after {record.get('n_turns', 0)} turn(s)"
               + (f"; error {episode_error['class']}: {episode_error['message'][:200]}" if episode_error else "")
               + f"; trajectory in {path}", err=True)
    click.echo(f"reward: {result.reward}")

