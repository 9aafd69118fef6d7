"""DVC stage `demos`: oracle trajectories of every training task, in the Terminus format.

    python stages/demos.py --tasks data/tasks.json --out data/sft/demos.jsonl --metrics metrics/demos.json

Each task's solution is played through the real agent loop (real container, real tmux) by an oracle
policy, one turn per command group, then task_complete and its confirmation; the final state is verified
by the task's tests and failures are dropped and counted (termagent.train.demos).
Reads params: demos (all keys), agent (all keys), sandbox runner keys.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from termagent.agent import AgentConfig
from termagent.params import ParamsError, load_params, section
from termagent.sandbox import Sandbox
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.index import tasks_in_split
from termagent.train.common import StageTimer, write_stage_metrics
from termagent.train.demos import DemosConfig, build_demos


@click.command()
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--image", "image_json", default="data/image.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="data/sft/demos.jsonl", show_default=True, type=click.Path(path_type=Path))
@click.option("--metrics", default="metrics/demos.json", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, tasks_index: Path, image_json: Path, out: Path, metrics: Path) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        params = load_params(params_file)
        cfg = section(params, "demos", DemosConfig, file=str(params_file))
        agent_cfg = section(params, "agent", AgentConfig, file=str(params_file))
        sandbox_params = section(params, "sandbox", SandboxParams, file=str(params_file))
    except ParamsError as e:
        raise click.ClickException(str(e)) from e
    timer = StageTimer()
    image = json.loads(image_json.read_text())["image"]
    tasks = tasks_in_split(tasks_index, cfg.split)
    try:
        with timer.phase("episodes"):
            stats = build_demos(tasks, Sandbox(sandbox_params.sandbox_config(image)), cfg, agent_cfg, out)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    write_stage_metrics(metrics, "demos", timer, **stats)
    click.echo(f"{out}: {stats['n_demos']}/{stats['n_tasks']} demos verified "
               f"(dropped {stats['dropped'] or 0}), mean {stats['mean_turns']} turns, {timer.as_dict()['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
