"""`termagent eval ...`: the eval tools outside DVC (`termagent report` is termagent.report.cli).

    termagent eval view data/eval/base                     # re-render the HTML viewer from trajectories
    termagent eval view runs/ep1/trajectory.json --out /tmp/view
    termagent eval convert harbor jobs/sft-123 --model sft --out metrics/eval/sft_tb2.json
    termagent eval convert tb1 runs/2026-11-29__10-00-00 --model sft --out metrics/eval/sft_tb1.json
    termagent eval harbor-command --served-model termagent --api-base http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from termagent.evaluate.config import EvalConfig
from termagent.params import profile_option, read_sections


@click.group("eval")
def eval_group() -> None:
    """Evaluation tools (the eval itself runs as a DVC stage: `dvc repro eval@base`, `dvc repro mt_grpo_eval`)."""


@eval_group.command("view")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="Default: SOURCE when it is a directory.")
@click.option("--title", default=None)
def view(source: Path, out: Path | None, title: str | None) -> None:
    """Write index.html + one page per trajectory from trajectory JSON files (a file, or a directory
    searched recursively for *.json trajectories)."""
    from termagent.evaluate.viewer import write_viewer

    files = [source] if source.is_file() else sorted(source.rglob("*.json"))
    trajectories = []
    for f in files:
        data = json.loads(f.read_text())
        if isinstance(data, dict) and "task_id" in data and ("turns" in data or "reward" in data):
            data.setdefault("attempt", 0)
            trajectories.append(data)
    if not trajectories:
        raise click.ClickException(f"{source}: no trajectory JSON (with task_id and turns) found")
    out = out or (source if source.is_dir() else source.parent)
    index = write_viewer(trajectories, out, title=title or f"trajectories: {source}")
    click.echo(f"{index} ({len(trajectories)} trajectories)")


@eval_group.command("convert")
@click.argument("kind", type=click.Choice(["harbor", "tb1"]))
@click.argument("run_dir", type=click.Path(exists=True, path_type=Path))
@click.option("--model", required=True, help="Model name recorded in the metrics.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Metrics JSON to write.")
@click.option("--viewer-dir", type=click.Path(path_type=Path), help="Also write trajectories + viewer here.")
def convert(kind: str, run_dir: Path, model: str, out: Path, viewer_dir: Path | None) -> None:
    """Convert a Harbor job directory or a TB1 run directory into our metrics schema (the numbers in OUT, the
    details beside it: <stem>.details.json)."""
    from termagent.evaluate.harbor import convert_harbor_job
    from termagent.evaluate.outputs import eval_details, write_eval_outputs, write_metrics
    from termagent.evaluate.tb1 import convert_tb1_results

    try:
        records, summary = (convert_harbor_job if kind == "harbor" else convert_tb1_results)(run_dir)
    except (FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    protocol = {"agent": f"{kind} (converted from {run_dir})"}
    extra = {"backend": kind, "official": summary}
    if viewer_dir:
        metrics = write_eval_outputs(records, out_dir=viewer_dir, metrics_path=out, model=model,
                                     protocol=protocol, wall_s=0.0, extra_metrics=extra)
    else:
        metrics = {**eval_details(records, model=model, protocol=protocol, wall_s=0.0), **extra}
        write_metrics(out, metrics)
    click.echo(f"{out}: accuracy {metrics['accuracy']:.3f} ± {metrics['accuracy_stderr']:.3f} "
               f"over {metrics['n_tasks']} tasks x {metrics['n_attempts']}")


@eval_group.command("harbor-command")
@click.option("--served-model", required=True, help="The model id the server answers to.")
@click.option("--api-base", required=True, help="e.g. http://127.0.0.1:8000/v1")
@click.option("--job-name", default="manual", show_default=True)
@profile_option
def harbor_command(served_model, api_base, job_name, params_file, profile) -> None:
    """Print the `harbor run` command the harbor backend would run with params' `eval:` section."""
    from termagent.evaluate.harbor import HarborRunConfig, harbor_run_argv

    cfg = read_sections(params_file, profile, missing_ok=True, eval=EvalConfig).eval
    argv = harbor_run_argv(HarborRunConfig(served_model=served_model, api_base=api_base, job_name=job_name,
                                           n_attempts=cfg.attempts, section=cfg.harbor))
    click.echo(shlex.join(argv))
