"""Copy one finished run's metrics out of its workspace into metrics/runs/<run>/ (what the README's table cites).

    dvc exp run --temp -n run17-seed0 mt_grpo_eval report 2>&1 | python scripts/stamp.py > run.log
    dvc exp apply run17-seed0 && python scripts/collect_run.py --workspace . --run run17_seed0 --started 0 \
        --stage-log run.log

Copies, as the stages wrote them: eval/<model>.json and eval/<model>.details.json (the numbers; per task, attempt
and split), train/<stage>.json and the RL stages' steps.jsonl, sample/<model>.json (rates.json: per-task solve
rates), datasets_summary.json, demos.json, summary.json, report.json and comparison.md (the report),
trained_families.json (the families each RL stage trained on), dvc.lock (the exact params and hashes of the run). Adds
minutes.json: each stage's wall minutes. With --stage-log (the run's output piped through scripts/stamp.py), from the
times its "Running stage" lines arrived; without, from the modification times of its outputs in DAG order (the first
from --started, the run's start as a Unix time), which `dvc exp apply` resets: collect from the workspace the run
wrote, or pass the log. Only files the run wrote (mtime >= --started) are copied.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click

from termagent.evaluate.config import eval_stage
from termagent.evaluate.metrics import compute_metrics

# DAG order; the file whose mtime ends each stage
STAGE_ENDS = [
    ("image", "data/image.json"), ("tasks", "data/tasks.json"), ("base_model", "models/base/manifest.json"),
    ("demos", "metrics/demos.json"), ("warmup", "metrics/warmup/train.json"),
    ("sample_warmup", "data/sample/warmup/rates.json"), ("grpo", "metrics/grpo/train.json"),
    ("datasets", "data/datasets/summary.json"), ("sft", "metrics/sft/train.json"), ("dpo", "metrics/dpo/train.json"),
    ("sample_dpo", "data/sample/dpo/rates.json"), ("curate", "data/curated/rl_tasks_mt.json"),
    ("mt_grpo", "metrics/mt_grpo/train.json"),
]


STAGE_LINE = re.compile(r"^[\d.]+\tRunning stage '([^']+)'")


def minutes_from_log(path: Path) -> tuple[dict[str, float], float]:
    """Stage -> wall minutes from a stamped `dvc repro`/`dvc exp run` log: each stage runs from its "Running stage"
    line to the next one (the last to the log's last stamped line). A stage DVC skipped prints no such line.
    Also returns the run's minutes, the log's first stamped line to its last."""
    stamps: list[tuple[float, str | None]] = []
    # lines end at "\n" only: a progress bar's "\r" redraws are part of the line stamp.py stamped (splitlines and
    # text-mode reads would break them into unstamped lines)
    for n, line in enumerate(path.read_bytes().decode(errors="replace").split("\n"), 1):
        if not line:
            continue
        t = line.partition("\t")[0]
        try:
            when = float(t)
        except ValueError:
            raise click.BadParameter(f"{path}:{n}: not '<unix time>\\t<line>' (pipe the run through "
                                     f"scripts/stamp.py)") from None
        m = STAGE_LINE.match(line)
        stamps.append((when, m.group(1) if m else None))
    starts = [(t, s) for t, s in stamps if s]
    if not starts:
        raise click.BadParameter(f"{path}: no \"Running stage\" line")
    ends = [t for t, _ in starts[1:]] + [stamps[-1][0]]
    minutes = {s: round((end - t) / 60, 1) for (t, s), end in zip(starts, ends)}
    return minutes, round((stamps[-1][0] - stamps[0][0]) / 60, 1)


def minutes_from_mtimes(ws: Path, started: float) -> dict[str, float]:
    """Stage -> wall minutes from its last output's modification time, in DAG order (stages not rerun left out)."""
    minutes, last = {}, started
    for stage, f in STAGE_ENDS:
        p = ws / f
        if not p.exists() or p.stat().st_mtime < started:  # not rerun by this run
            continue
        t = p.stat().st_mtime
        if t >= last:
            minutes[stage] = round((t - last) / 60, 1)
        last = t
    return minutes


def copy(src: Path, dst: Path, since: float) -> bool:
    """Copy src when this run wrote it (committed metrics of an earlier run sit in a fresh clone too)."""
    if not src.is_file() or src.stat().st_mtime < since:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return True


def add_endings(metrics: Path, trajectories: Path) -> None:
    """Eval metrics written before they counted endings: `ended_by` and `agent_timeouts` from the trajectories."""
    doc = json.loads(metrics.read_text())
    if "ended_by" in doc or "per_task" not in doc or not trajectories.is_dir():  # new: in the details' `trials`
        return
    records = [json.loads(f.read_text()) for f in sorted(trajectories.glob("*.json"))]
    fresh = compute_metrics(records, protocol={}, wall_s=0.0)
    doc.update({k: fresh[k] for k in ("ended_by", "agent_timeouts")}, ended_by_from="trajectories (collect_run)")
    metrics.write_text(json.dumps(doc, indent=2) + "\n")


@click.command()
@click.option("--workspace", required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--run", "run_name", required=True, help="metrics/runs/<run>, e.g. run11_seed0")
@click.option("--dest", default=".", show_default=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("--started", required=True, type=float, help="Unix time the run started: older files are not its own")
@click.option("--stage-log", default=None, type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The run's output piped through scripts/stamp.py: stage minutes from it")
def main(workspace: Path, run_name: str, dest: Path, started: float, stage_log: Path | None) -> None:
    ws, out = workspace, dest / "metrics" / "runs" / run_name
    copied = []
    for f in sorted((ws / "metrics/eval").glob("*.json")):
        if copy(f, out / "eval" / f.name, started):
            copied.append(f.name)
            add_endings(out / "eval" / f.name, ws / "data/eval" / f.stem / "trajectories")
    for stage in ("warmup", "grpo", "sft", "dpo", "mt_grpo"):
        copy(ws / f"metrics/{stage}/train.json", out / "train" / f"{stage}.json", started)
        copy(ws / f"data/rollouts/{stage}/steps.jsonl", out / "train" / f"{stage}_steps.jsonl", started)
    for d in sorted((ws / "data/sample").glob("*/rates.json")):
        copy(d, out / "sample" / f"{d.parent.name}.json", started)
    for src, name in (("data/datasets/summary.json", "datasets_summary.json"), ("metrics/demos.json", "demos.json"),
                      ("metrics/summary.json", "summary.json"), ("reports/summary.json", "report.json"),
                      ("reports/comparison.md", "comparison.md"), ("metrics/trained_families.json",
                                                                  "trained_families.json"), ("dvc.lock", "dvc.lock")):
        copy(ws / src, out / name, started)
    if stage_log is None:
        minutes = minutes_from_mtimes(ws, started)
        ends = [(ws / f).stat().st_mtime for f in ("metrics/summary.json", "reports/comparison.md")
                if (ws / f).exists()]
        total = round((max(ends) - started) / 60, 1) if ends and max(ends) >= started else None
    else:  # the log times the run itself: --started (0 after `dvc exp apply`) only picks the files to copy
        minutes, total = minutes_from_log(stage_log)
    evals = {}
    for f in sorted((ws / "metrics/eval").glob("*.details.json")):
        if f.stat().st_mtime < started:
            continue
        wall = json.loads(f.read_text()).get("wall_s")
        if wall is not None:
            evals[eval_stage(f.name.removesuffix(".details.json"))] = round(wall / 60, 1)
    how = ("stage minutes from output modification times in DAG order" if stage_log is None
           else f"stage minutes from the stamped run log ({stage_log.name}): one 'Running stage' line to the next")
    doc = {"how": how + "; evals from their wall_s",
           "stages": minutes, "evals": evals}
    if total is not None:
        doc["total"] = total
    out.mkdir(parents=True, exist_ok=True)
    (out / "minutes.json").write_text(json.dumps(doc, indent=2) + "\n")
    click.echo(f"{out}: evals {copied}; minutes {doc}")


if __name__ == "__main__":
    main()
