"""DVC stages `eval@<model>` (eval@base, eval@warmup, ...: one foreach over eval.models) and `mt_grpo_eval` (the
final model): evaluate one model.

    python stages/eval.py --model base --tasks data/tasks.json --image data/image.json \
        --out data/eval/base --metrics metrics/eval/base.json        # what `dvc repro eval@base` runs
    python stages/eval.py --model mt_grpo --profile h100 ...         # mt_grpo_eval on the H100 profile

Runs termagent.evaluate.model.evaluate_model (backend local | harbor | tb1).
Reads params: eval (all keys), agent (all keys), serve (policy serve / harbor / tb1), engine (policy openvino),
sandbox runner keys.
Writes --metrics (a few numbers) and its details (metrics/eval/<model>.details.json: per task and attempt, per group,
protocol), --out (trajectories, index.json, index.html), and <eval.harbor.jobs_dir>/<model> (Harbor's job).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import click

from termagent.agent.config import AgentConfig
from termagent.evaluate.config import EvalConfig
from termagent.evaluate.model import evaluate_model, harbor_jobs_dir
from termagent.params import profile_option, read_sections
from termagent.policy.openvino import EngineConfig
from termagent.sandbox.settings import SandboxParams
from termagent.serve import ServeConfig

PathType = click.Path(path_type=Path)


@click.command()
@click.option("--model", required=True, help="Model name: base, or a directory name under models/ (sft, dpo, ...).")
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True, type=PathType)
@click.option("--image", "image_record", default="data/image.json", show_default=True, type=PathType)
@click.option("--out", "out_dir", required=True, type=PathType, help="data/eval/<model>")
@click.option("--metrics", "metrics_path", required=True, type=PathType, help="metrics/eval/<model>.json")
@profile_option
def main(model: str, tasks_index: Path, image_record: Path, out_dir: Path, metrics_path: Path,
         params_file: Path, profile: str | None) -> None:
    p = read_sections(params_file, profile, eval=EvalConfig, agent=AgentConfig, sandbox=SandboxParams,
                      serve=ServeConfig, engine=EngineConfig)
    harbor_jobs_dir(model, p.eval)  # <eval.harbor.jobs_dir>/<model>: the stage's persisted output (Harbor's job)
    try:
        m = evaluate_model(model, p.eval, agent=p.agent, sandbox=p.sandbox, serve=p.serve, tasks_index=tasks_index,
                           image_record=image_record, out_dir=out_dir, metrics_path=metrics_path, log=click.echo,
                           engine=p.engine)
    except (FileNotFoundError, ValueError, RuntimeError, subprocess.CalledProcessError) as e:
        raise click.ClickException(str(e)) from e
    if m.get("evaluated") is False:
        click.echo(f"{metrics_path}: not evaluated ({m['reason']})")
        return
    sampled = ((m.get("sampled") or {}).get("by_split") or {}).get(m["primary"])
    click.echo(f"{metrics_path}: accuracy {m['accuracy']:.3f} ± {m['accuracy_stderr']:.3f} on {m['primary']} "
               f"({m['n_tasks']} tasks x {m['n_attempts']}), pass@k {m['pass_at_k']}, "
               + (f"sampled {sampled['accuracy']:.3f} ({sampled['n_attempts']} attempts), " if sampled else "")
               + f"errors {m['trials']['errors']}, wall {m['wall_s']:.0f} s")
    click.echo(f"viewer: {out_dir / 'index.html'}")


if __name__ == "__main__":
    main()
