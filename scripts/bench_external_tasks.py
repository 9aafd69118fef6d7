"""Public Terminal-Bench tasks offline: `termagent tasks check` twice over a directory of TB1/TB2 tasks.

    python scripts/bench_external_tasks.py TASKS_DIR [TASKS_DIR...] --out metrics/bench_external_tasks.json

Run 1 starts without the task images of these tasks (removed first, unless --keep-images): it builds
them (and any flavour image or Debian root not yet built: see `flavours_built` in the JSON). Run 2 is the
same command again and must reuse every image (its `images_cached` counts them). Each run is the real CLI
in a subprocess, timed by wall clock. Per task the JSON keeps ok, the error class and first line of each
failing agent, and the substitutions recorded in the trial (alias, Python version, uv, prebuilt image).
The tasks stay where they are: they are not copied into the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from termagent import atomic


def run_check(dirs: list[Path], concurrency: int, params: str) -> tuple[float, list[dict], int]:
    with tempfile.TemporaryDirectory(prefix="bench-external-") as tmp:
        out = Path(tmp) / "check.json"
        cmd = [sys.executable, "-m", "termagent", "tasks", "check", *map(str, dirs), "-j", str(concurrency),
               "--json", str(out), "--params", params]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - start
        if not out.exists():
            raise click.ClickException(f"tasks check wrote no JSON (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
        return wall, json.loads(out.read_text()), proc.returncode


def summarize(entries: list[dict]) -> dict:
    tasks = []
    for e in entries:
        # the checker's own classes (issue 29): the error class of a failing trial, OracleFailed,
        # NopPassesFlaky / NopPassesVacuous; each with a one-line cause
        failures = {f["agent"]: {"class": f["class"], "cause": f["cause"][:300],
                                 **({"environment": f["environment"]} if f.get("environment") else {})}
                    for f in e.get("failures", [])}
        subs = []
        for s in e["image"].get("substitutions", []):
            if s.get("what") == "alias":
                subs.append({"what": "alias", "from": s["from"], "kind": s.get("kind"), "suite": s.get("suite"),
                             "python": s.get("python"), "workdir": s.get("workdir"), "uv": s.get("uv"),
                             "trust": s.get("trust"), "pip_replaced_debian": s.get("pip_replaced_debian"),
                             "flavour_built_now": s.get("built_now")})
            else:
                subs.append(s)
        build_s = max(e["timings"][a].get("build", 0.0) for a in ("oracle", "nop"))
        if e["image"].get("verifier_pythons"):
            subs.append({"what": "verifier_pythons", **e["image"]["verifier_pythons"]})
        tasks.append({"task_id": e["task_id"], "layout": e["layout"], "ok": e["ok"], "class": e.get("class"),
                      "oracle": e["oracle"]["reward"], "nop": e["nop"]["reward"], "failures": failures,
                      "build_s": round(build_s, 1), "substitutions": subs})
    classes = Counter(f["class"] for t in tasks for f in t["failures"].values())
    task_classes = Counter(t["class"] for t in tasks if not t["ok"])
    return {"tasks": len(tasks), "ok": sum(t["ok"] for t in tasks), "not_ok_by_class": dict(task_classes),
            "pass_rate": round(sum(t["ok"] for t in tasks) / max(len(tasks), 1), 4),
            "failure_classes": dict(classes),
            "flavours_built": sorted({s.get("flavour_image", "") for e in entries
                                      for s in e["image"].get("substitutions", []) if s.get("built_now")}),
            "per_task": tasks}


def task_images(task_ids: list[str]) -> list:
    import docker

    from termagent.sandbox.task_image import TASK_IMAGE_REPO, _slug

    client = docker.from_env()
    return [image for task_id in task_ids for image in client.images.list(name=f"{TASK_IMAGE_REPO}/{_slug(task_id)}")]


def remove_task_images(task_ids: list[str]) -> int:
    import docker

    client = docker.from_env()
    removed = 0
    for image in task_images(task_ids):
        for tag in image.tags:
            try:
                client.images.remove(tag, noprune=False)
                removed += 1
            except docker.errors.APIError:
                pass  # in use by a running container of someone else: left alone
    return removed


@click.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=REPO / "metrics" / "bench_external_tasks.json", show_default=True)
@click.option("-j", "--concurrency", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--params", default=str(REPO / "params.yaml"), show_default=True)
@click.option("--keep-images", is_flag=True, help="Do not remove the tasks' images before run 1.")
@click.option("--drop-bundles", is_flag=True,
              help="Also remove the verifier-Python bundles (sandbox/pythons.py) before run 1: run 1 rebuilds them.")
def main(dirs: tuple[Path, ...], out: Path, concurrency: int, params: str, keep_images: bool,
         drop_bundles: bool) -> None:
    from termagent.params import read_sections
    from termagent.sandbox.settings import SandboxParams
    from termagent.tasks.load import discover_tasks

    ids = [t.id for t in discover_tasks(list(dirs))]
    removed = 0 if keep_images else remove_task_images(ids)
    bundles_removed = 0
    if drop_bundles:
        cache = Path(os.path.expanduser(read_sections(params, missing_ok=True, sandbox=SandboxParams)
                                        .sandbox.offline.cache_dir)) / "pythons"
        for bundle in cache.glob("*.tar"):
            bundle.unlink()
            bundles_removed += 1
    runs = []
    for n in (1, 2):
        present = len(task_images(ids))
        wall, entries, rc = run_check(list(dirs), concurrency, params)
        summary = summarize(entries)
        runs.append({"run": n, "wall_s": round(wall, 1), "exit_code": rc, "task_images_present_before": present,
                     **summary})
        click.echo(f"run {n}: {summary['ok']}/{summary['tasks']} ok in {wall:.0f} s ({present} of "
                   f"{len(ids)} task images present before; failures {summary['failure_classes']})")
    result = {"command": "termagent tasks check " + " ".join(map(str, dirs)) + f" -j {concurrency} (twice)",
              "task_images_removed_before_run_1": removed, "verifier_python_bundles_removed": bundles_removed,
              "concurrency": concurrency,
              "machine": f"{os.cpu_count()} CPUs", "runs": runs,
              "definitions": {"ok": "oracle reward 1 and nop reward 0",
                              "wall_s": "wall clock of the whole CLI run, image builds included",
                              "task_images_present_before": "tasks whose image was in the engine before the run",
                              "build_s": "per task, the longer image preparation of its two trials (a build, "
                                         "or a wait for the other trial's build; 0 when a container started ahead of the trial "
                                         "built it: task_images_present_before is the reliable count)"}}
    atomic.write_json(out, result)
    click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
