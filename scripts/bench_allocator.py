"""CPU settings of the warmup's own training loop, side by side in one run: glibc's default malloc vs the heap setting
(termagent/allocator.py), or any environment variable's values (`--vary`), alone or beside a Docker-heavy job.

    python scripts/bench_allocator.py --out metrics/bench_allocator.json          (make bench-allocator)
    python scripts/bench_allocator.py --vary OMP_WAIT_POLICY=ACTIVE,PASSIVE --beside alone,containers \
        --out metrics/bench_contention.json                                          (make bench-contention)

`--beside containers` runs, for the whole round, what an eval or GRPO step does next to the trainer: containers of
the sandbox base image started, kept busy on one CPU for a few seconds and removed, two at a time.

Each round trains `train_sft` with the warmup's params (params.yaml, `--profile` merged) for `--steps` optimizer
steps on the first `--examples` demos of data/sft/demos.jsonl, from models/base, in a fresh process with
`TERMAGENT_MALLOC` = system or heap; the modes alternate (system, heap, system, ...) so a load change on a shared
machine hits both alike. Per round: the training phase's wall time and trained tokens/s (from the run's own
metrics), and the child process's user and system CPU seconds (`getrusage`), its peak resident set and the load
average. A benchmark, not a test: nothing asserts on the times.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from termagent import atomic

MODES = ("system", "heap")


def child(params_file: str, profile: str | None, examples: int, steps: int, result_path: str) -> None:
    """One training run in this process (the mode came in through the environment)."""
    from termagent import allocator
    from termagent.params import read_sections
    from termagent.train.sft import load_conversations, train_sft
    from termagent.train.warmup import WarmupParams

    p = read_sections(params_file, profile, warmup=WarmupParams)
    params = p.warmup
    conversations, _ = load_conversations(params.datasets)
    params.max_steps = steps
    params.trl.update(logging_steps=1, warmup_steps=0.0)  # no step at rate 0
    with tempfile.TemporaryDirectory(prefix="bench-allocator-") as tmp:
        m = train_sft(REPO / "models" / "base", Path(tmp) / "adapter", params, metrics_dir=Path(tmp) / "metrics",
                      stage="warmup", conversations=conversations[:examples])
        train_s = json.loads((Path(tmp) / "metrics" / "train.json").read_text())["phases_s"]["train"]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    Path(result_path).write_text(json.dumps({
        "malloc": allocator.configure(), "train_s": train_s,
        "tokens_per_s": m.get("tokens_per_s"), "metrics": {k: m.get(k) for k in ("first_loss", "last_loss")},
        "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2), "max_rss_mib": round(ru.ru_maxrss / 1024),
    }))


@contextlib.contextmanager
def container_job(active: bool, parallel: int = 2, busy_s: float = 4.0):
    """While active: `parallel` loops that each start a container of the base image, keep one CPU busy for
    `busy_s` seconds in it and remove it, again and again (what trials do beside a trainer)."""
    if not active:
        yield
        return
    image = json.loads((REPO / "data" / "image.json").read_text())["image"]
    stop = threading.Event()
    script = f"end=$(( $(date +%s) + {int(busy_s)} )); while [ $(date +%s) -lt $end ]; do :; done"

    def loop():
        while not stop.is_set():
            subprocess.run(["docker", "run", "--rm", "--cpus", "1", image, "sh", "-c", script],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(parallel)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(busy_s + 30)


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=None, help="metrics/bench_allocator.json")
@click.option("--params", "params_file", default="params.yaml", show_default=True)
@click.option("--profile", default=None)
@click.option("--examples", default=16, show_default=True, help="demos trained on (from the top of the file)")
@click.option("--steps", default=2, show_default=True, help="optimizer steps per round")
@click.option("--repeats", default=2, show_default=True, help="rounds per mode")
@click.option("--vary", default=f"TERMAGENT_MALLOC={','.join(MODES)}", show_default=True,
              help="NAME=V1,V2,...: the environment variable whose values the rounds alternate.")
@click.option("--beside", default="alone", show_default=True,
              help="Comma-separated conditions: alone, containers (a Docker-heavy job beside the trainer).")
@click.option("--child-mode", default=None, hidden=True)
@click.option("--child-result", default=None, hidden=True)
def main(out, params_file, profile, examples, steps, repeats, vary, beside, child_mode, child_result):
    if child_mode:
        child(params_file, profile, examples, steps, child_result)
        return
    if not (REPO / "models" / "base" / "config.json").is_file():
        raise click.ClickException("models/base is missing: run `dvc repro base_model` first")
    name, _, values = vary.partition("=")
    modes = [v for v in values.split(",") if v]
    conditions = [c for c in beside.split(",") if c]
    if not name or not modes or not set(conditions) <= {"alone", "containers"}:
        raise click.ClickException(f"--vary NAME=V1,V2 and --beside alone|containers, got {vary!r} / {beside!r}")
    rounds = []
    for r in range(repeats):
        for condition in conditions:
            for mode in modes:
                with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                    result_path = f.name
                env = {**os.environ, name: mode, "PYTHONPATH": str(REPO)}
                cmd = [sys.executable, __file__, "--params", params_file, "--examples", str(examples),
                       "--steps", str(steps), "--child-mode", mode, "--child-result", result_path]
                if profile:
                    cmd += ["--profile", profile]
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                with container_job(condition == "containers"):
                    subprocess.run(cmd, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
                row = {"round": r, "mode": mode, "beside": condition, "wall_s": round(time.monotonic() - t0, 2),
                       "load_before": load, **json.loads(Path(result_path).read_text())}
                os.unlink(result_path)
                rounds.append(row)
                click.echo(f"round {r} {condition:10s} {name}={mode:8s}: {row['tokens_per_s']} trained tokens/s, "
                           f"user {row['user_s']} s, sys {row['sys_s']} s, peak RSS {row['max_rss_mib']} MiB")
    summary = {}
    for condition in conditions:
        for mode in modes:
            rows = [x for x in rounds if x["mode"] == mode and x["beside"] == condition]
            summary[f"{condition}/{mode}"] = {
                "tokens_per_s_median": statistics.median(x["tokens_per_s"] for x in rows),
                "sys_s_median": statistics.median(x["sys_s"] for x in rows),
                "user_s_median": statistics.median(x["user_s"] for x in rows),
                "max_rss_mib_max": max(x["max_rss_mib"] for x in rows)}
    if "containers" in conditions and "alone" in conditions:  # how much each setting keeps beside the job
        summary["kept_beside_containers"] = {
            mode: round(summary[f"containers/{mode}"]["tokens_per_s_median"]
                        / summary[f"alone/{mode}"]["tokens_per_s_median"], 3) for mode in modes}
    result = {"what": f"the warmup's train_sft: {name} in {modes}, {conditions}", "variable": name,
              "examples": examples, "steps": steps, "repeats": repeats, "cpu_count": os.cpu_count(),
              "summary": summary, "rounds": rounds}
    click.echo(json.dumps(summary, indent=1))
    if out:
        atomic.write_json(out, result)


if __name__ == "__main__":
    main()
