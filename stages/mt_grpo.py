"""DVC stage `mt_grpo`: multi-turn GRPO with turn-level credit, from the DPO adapter, on the curated tasks.

    python stages/mt_grpo.py                                      # what `dvc repro mt_grpo` runs
    python stages/mt_grpo.py --start-adapter "" --tasks /tmp/ids.json --out /tmp/mt   # fresh LoRA on the base

Episodes run in real containers through the eval agent loop (termagent/train/mt_grpo.py says how rollouts,
token buffers, advantages and filtering work). Reads params: mt_grpo (all keys), agent (pane, observation
limit, deadline margin; the RL settings override turns, per-turn cap, temperature, context strategy),
sandbox runner keys. Writes --out (PEFT adapter + tokenizer), --rollouts-dir (rollouts.jsonl with turn_info,
steps.jsonl, families.json: the families it trained on, termagent.trained), --metrics-dir (train.json, dvclive/ curves).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from termagent.agent.config import AgentConfig
from termagent.models.artifact import resolve_base
from termagent.params import profile_option, read_sections
from termagent.policy.openvino import EngineConfig
from termagent.sandbox.settings import SandboxParams
from termagent.train.common import relaunch_distributed
from termagent.train.mt_grpo import MTGRPOParams, load_task_list, train_mt_grpo
from termagent.trained import write_trained_families

P = click.Path(path_type=Path)


@click.command()
@profile_option
@click.option("--base", default="models/warmup", show_default=True, type=P,
              help="A model directory, or a warmup directory (its start.json names the base the adapters train on).")
@click.option("--start-adapter", default="models/dpo", show_default=True,
              help='The adapter training continues from; "" starts a fresh LoRA (mt_grpo.lora) on --base.')
@click.option("--tasks", "task_list", default="data/curated/rl_tasks_mt.json", show_default=True, type=P,
              help='Task ids to train on: the curate stage\'s {"task_ids": [...]} or a JSON list.')
@click.option("--index", default="data/tasks.json", show_default=True, type=P)
@click.option("--image", default="data/image.json", show_default=True, type=P)
@click.option("--out", default="models/mt_grpo", show_default=True, type=P)
@click.option("--rollouts-dir", default="data/rollouts/mt_grpo", show_default=True, type=P)
@click.option("--metrics-dir", default="metrics/mt_grpo", show_default=True, type=P)
def main(params_file, profile, base, start_adapter, task_list, index, image, out, rollouts_dir, metrics_dir) -> None:
    from termagent.sandbox import Sandbox

    s = read_sections(params_file, profile, mt_grpo=MTGRPOParams, agent=AgentConfig, sandbox=SandboxParams,
                      engine=EngineConfig)
    config, agent, sandbox_params = s.mt_grpo, s.agent, s.sandbox
    relaunch_distributed()  # NUM_GPUS > 1: re-exec under `accelerate launch` (configured, not run here: no GPU)
    try:
        tasks = load_task_list(task_list, index)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e
    # the containers of a whole rollout batch start while the model generates
    sandbox_config = dataclasses.replace(sandbox_params.sandbox_config(json.loads(image.read_text())["image"]),
                                         concurrency=max(sandbox_params.concurrency, config.concurrency))
    with Sandbox(sandbox_config) as sandbox:
        try:
            m = train_mt_grpo(config, agent, sandbox, tasks, model_dir=resolve_base(base), start_adapter=start_adapter or None,
                              out_dir=out, rollouts_dir=rollouts_dir, metrics_dir=metrics_dir, engine=s.engine)
        except (FileNotFoundError, ValueError, RuntimeError) as e:
            raise click.ClickException(str(e)) from e
    try:
        families = write_trained_families("mt_grpo", rollouts_dir, index)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{rollouts_dir / 'families.json'}: trained on {', '.join(families['families'])}")
    click.echo(f"{out}: {m['steps']} steps, {m['wall_s']:.0f} s (step wall {m['step_wall_s']}), filtered "
               f"{m['filtered_frac']}, drift turns {m['drift_turns']} / clean {m['clean_turns']}, "
               f"reward {m['reward_mean']}")


if __name__ == "__main__":
    main()
