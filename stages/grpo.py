"""DVC stage `grpo`: single-turn GRPO on the train tasks, rewarded in real containers.

    python stages/grpo.py                                  # what `dvc repro grpo` runs
    python stages/grpo.py --profile h100 --out /tmp/grpo ...        # every path is an option

--rates (the sample stage's rates.json) restricts the tasks to those the start solves sometimes.
Reads params: grpo (all keys), agent (the terminal: pane size, observation limit, deadline margin; the
protocol: agent.protocol, harbor_package, harbor_version),
sandbox (runner keys). Starts where models/warmup/start.json says (the warmup adapter when warmup.enabled,
the embedded profile; else the base model, H100).
Writes the adapter (--out), rollouts.jsonl / steps.jsonl / screens.json / families.json (the families it trained
on, termagent.trained) (--rollouts-dir), checkpoints
(--checkpoints; a rerun with the same config resumes from the last one), and --metrics-dir: train.json,
timing.json, reward_distribution.json, dvclive/ curves, curves.png, reward.png.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from termagent.agent.config import AgentConfig
from termagent.params import profile_option, read_sections
from termagent.policy.openvino import EngineConfig
from termagent.rollouts import tasks_with_signal
from termagent.sandbox import Sandbox
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.index import tasks_in_split
from termagent.train.common import relaunch_distributed
from termagent.train.grpo import GRPOParams, GRPOPaths, train_grpo
from termagent.train.single_turn import EnvConfig
from termagent.trained import write_trained_families

P = click.Path(path_type=Path)


@click.command()
@profile_option
@click.option("--warmup", default="models/warmup", show_default=True, type=P)
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True, type=P)
@click.option("--rates", default=None, type=P,
              help="The start policy's solve rates (sample stage): train only on tasks whose rate is in (0, 1).")
@click.option("--image", default="data/image.json", show_default=True, type=P)
@click.option("--out", default="models/grpo", show_default=True, type=P)
@click.option("--rollouts-dir", default="data/rollouts/grpo", show_default=True, type=P)
@click.option("--checkpoints", default="checkpoints/grpo", show_default=True, type=P)
@click.option("--metrics-dir", default="metrics/grpo", show_default=True, type=P)
def main(params_file, profile, warmup, tasks_index, rates, image, out, rollouts_dir, checkpoints, metrics_dir) -> None:
    s = read_sections(params_file, profile, grpo=GRPOParams, agent=AgentConfig, sandbox=SandboxParams,
                      engine=EngineConfig)
    config, agent, sandbox_params = s.grpo, s.agent, s.sandbox
    relaunch_distributed()  # NUM_GPUS > 1: re-exec under `accelerate launch` (configured, not run here: no GPU)
    eff = config.effective()
    # Every container of a generation batch starts while the model generates: the warm pool holds them all.
    sandbox_config = dataclasses.replace(sandbox_params.sandbox_config(json.loads(image.read_text())["image"]),
                                         warm_pool=max(sandbox_params.warm_pool, eff.generation_batch_size))
    env = EnvConfig.from_agent(agent)
    paths = GRPOPaths(warmup=warmup, out=out, rollouts_dir=rollouts_dir, checkpoints=checkpoints,
                      metrics_dir=metrics_dir)
    tasks = tasks_in_split(tasks_index, "train")
    if rates is not None:
        try:
            keep = set(tasks_with_signal(rates, min_rate=config.min_rate, max_rate=config.max_rate))
        except ValueError as e:
            raise click.ClickException(str(e)) from e
        if not keep:
            raise click.ClickException(
                f"{rates}: no train task with a solve rate in ({config.min_rate}, {config.max_rate}): GRPO would have "
                "no group with a pass and a fail (raise sample.attempts or sample.max_tasks, train the start longer, "
                "or widen grpo.min_rate / grpo.max_rate)")
        tasks = [t for t in tasks if t.id in keep]
        click.echo(f"grpo: {len(tasks)} train tasks with a solve rate in ({config.min_rate}, {config.max_rate}) "
                   f"({rates})")
    with Sandbox(sandbox_config) as sandbox:
        try:
            m = train_grpo(config, paths, tasks=tasks, sandbox=sandbox,
                           env_config=env, extra_fingerprint={"agent": dataclasses.asdict(env)}, engine=s.engine)
        except (FileNotFoundError, ValueError, RuntimeError) as e:
            raise click.ClickException(str(e)) from e
    try:
        families = write_trained_families("grpo", rollouts_dir, tasks_index)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{rollouts_dir / 'families.json'}: trained on {', '.join(families['families'])}")
    click.echo(f"{out}: {m['steps']} steps ({m['seconds_per_step'] or 0:.1f} s/step), {m['n_rollouts']} rollouts, "
               f"valid JSON {m['valid_json_rate']:.2f}, verifier pass {m['verifier_pass_rate']:.2f}, "
               f"groups with a pass and a fail: {m['groups_signal']}/{m['groups']}, "
               f"infra failures {m['n_infra_failures']}, adapter change {m['adapter_delta_l2']:.4g}"
               + (f", resumed from {m['resumed_from']}" if m["resumed_from"] else ""))


if __name__ == "__main__":
    main()
