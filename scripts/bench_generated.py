"""Task-family benchmark: no-build placement vs `docker build` per instance, and the check's wall time.

    python scripts/bench_generated.py --out metrics/bench_generated.json        (make bench-generated)

What is measured (the JSON's "definitions" says the same):
  placed  first container of a task on the no-build path: prepare (read the Dockerfile into a placement,
          look up the FROM image) + create + put the files in + start; the sum over the sampled tasks.
  built   first container of a task on the build path: `docker build` of its image (none cached: any
          earlier image of the task is removed first) + create + start; the same tasks. The images built
          here are removed afterwards.
  speedup built / placed (sums).
  check   wall time of `termagent tasks check DIR -j J` over every task of DIR (oracle and nop per
          task, on the placement path), and how many were ok.
"""

from __future__ import annotations

import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import docker

from termagent import atomic
from termagent.params import read_sections
from termagent.sandbox import Sandbox, placement
from termagent.sandbox.image import ensure_base_image
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.load import discover_tasks


def first_container(sandbox: Sandbox, task) -> tuple[float, float, object]:
    start = time.monotonic()
    image = sandbox.prepare(task)
    prepared = time.monotonic()
    with sandbox.trial(task, image=image):
        started = time.monotonic()
    return prepared - start, started - prepared, image


@click.command()
@click.option("--tasks", "tasks_dir", default="data/generated", show_default=True, type=click.Path(exists=True))
@click.option("--per-family", default=0, show_default=True, help="tasks per family timed on both paths (0: all)")
@click.option("--check/--no-check", default=True, show_default=True, help="also time `termagent tasks check`")
@click.option("-j", "--concurrency", default=4, show_default=True)
@click.option("--out", default="metrics/bench_generated.json", show_default=True, type=click.Path())
def main(tasks_dir: str, per_family: int, check: bool, concurrency: int, out: str) -> None:
    tasks = discover_tasks([tasks_dir])
    by_family: dict[str, list] = collections.defaultdict(list)
    for t in tasks:
        by_family[str(t.metadata.get("family"))].append(t)
    sample = [t for ts in by_family.values() for t in (ts[:per_family] if per_family else ts)]
    params = read_sections("params.yaml", sandbox=SandboxParams).sandbox
    base = ensure_base_image(params.base_recipe())
    client = docker.from_env()
    cfg = params.sandbox_config(base.tag)
    cfg.warm_pool = 0
    rows = []
    placed_box, built_box = Sandbox(cfg), None
    built_cfg = params.sandbox_config(base.tag)
    built_cfg.warm_pool, built_cfg.place_files = 0, False
    built_box = Sandbox(built_cfg)
    try:
        with click.progressbar(sample, label="placed vs built") as bar:
            for task in bar:
                if placement.plan(task) is None:
                    raise click.ClickException(f"{task.id}: its Dockerfile is not simple: no placement path")
                p_prep, p_start, _ = first_container(placed_box, task)
                for img in client.images.list(filters={"label": f"termagent.task={task.id}"}):
                    client.images.remove(img.id, force=True)  # a first-time build, not a cached one
                b_prep, b_start, image = first_container(built_box, task)
                client.images.remove(image.tag, force=True)
                rows.append({"task": task.id, "placed_prepare_s": p_prep, "placed_start_s": p_start,
                             "built_prepare_s": b_prep, "built_start_s": b_start})
    finally:
        placed_box.close()
        built_box.close()
    placed = sum(r["placed_prepare_s"] + r["placed_start_s"] for r in rows)
    built = sum(r["built_prepare_s"] + r["built_start_s"] for r in rows)
    result = {
        "tasks_dir": tasks_dir, "n_tasks": len(tasks), "n_families": len(by_family), "n_timed": len(rows),
        "families": {f: len(ts) for f, ts in sorted(by_family.items())},
        "placed_total_s": round(placed, 2), "built_total_s": round(built, 2),
        "placed_per_task_s": round(placed / len(rows), 3), "built_per_task_s": round(built / len(rows), 3),
        "build_only_per_task_s": round(sum(r["built_prepare_s"] for r in rows) / len(rows), 3),
        "placed_prepare_per_task_s": round(sum(r["placed_prepare_s"] for r in rows) / len(rows), 4),
        "speedup": round(built / placed, 2) if placed else None,
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg(), "python": platform.python_version()},
        "definitions": __doc__.split("What is measured (the JSON's \"definitions\" says the same):\n", 1)[1].strip(),
        "per_task": rows,
    }
    if check:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "check.json"
            start = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "termagent", "tasks", "check", tasks_dir,
                                   "-j", str(concurrency), "--json", str(report)], capture_output=True, text=True, check=False)
            wall = time.monotonic() - start
            entries = json.loads(report.read_text()) if report.exists() else []
        result["check"] = {"command": f"termagent tasks check {tasks_dir} -j {concurrency}", "wall_s": round(wall, 1),
                           "n_tasks": len(entries), "n_ok": sum(e["ok"] for e in entries), "exit_code": proc.returncode,
                           "not_ok": [e["task_id"] for e in entries if not e["ok"]],
                           "placed": sum(bool((e.get("image") or {}).get("placed")) for e in entries),
                           "loadavg_at_end": os.getloadavg()}
    atomic.write_json(out, result)
    click.echo(f"{out}: placed {result['placed_per_task_s']} s/task vs built {result['built_per_task_s']} s/task "
               f"over {len(rows)} tasks (speed-up {result['speedup']}x)")
    if check:
        c = result["check"]
        click.echo(f"check: {c['n_ok']}/{c['n_tasks']} ok in {c['wall_s']} s")


if __name__ == "__main__":
    main()
