"""Sandbox benchmark: the oracle over the task suite at several concurrencies, against the naive approach.

    python scripts/bench_sandbox.py --out metrics/bench_sandbox.json        (make bench-sandbox)

What is counted, per trial (the JSON's "definitions" says the same):
  overhead     = create + agent + verify + remove - solve: the time the trial spends from asking for a
                 container until it is done with it, minus the solution's own run time (timed inside the
                 container). create/remove are what the trial waited for: a container started ahead of
                 it (warm pool) or removed in the background costs the trial only the hand-over.
  sandbox_only = overhead - tests: also without the test command's own run time (pytest start-up and
                 the tests are the task's cost, not the sandbox's).
  components   = create, create_engine (create + start as the engine took it, ahead of time or not),
                 agent_infra (agent - solve: copying the solution in, the exec round trip), verify,
                 tests, verify_infra (verify - tests: copying the tests in, the exec, reading the reward),
                 remove, remove_engine (the engine's removal, in the background or not).
  trials/min   = trials / wall time of run_trials, which includes waiting for every removal.
The naive approach is what a hand-written script does: a fresh `docker run` per command — one for the
solution (then `docker commit`, so the tests see its work), one for the tests with the tests mounted;
its overhead is its wall time minus the same solution time. Task images are built before timing
starts, for both; both run on the same tasks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from termagent import atomic
from termagent.params import read_sections
from termagent.sandbox import Sandbox, reaper, run_trials
from termagent.sandbox.agents import OracleAgent
from termagent.sandbox.image import ensure_base_image
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.load import find_task_dirs, read_task


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


DEFINITIONS = {
    "overhead": "create + agent + verify + remove - solve (seconds the trial spent, from asking for a "
                "container to being done with it, minus the solution's own run time timed inside the container)",
    "sandbox_only": "overhead - tests (also without the test command's own run time: pytest start-up + tests)",
    "create": "seconds the trial waited for a started container (near 0 when one was started ahead of it)",
    "create_engine": "seconds create + start took at the engine, on or off the trial's path",
    "agent_infra": "agent - solve: copying the solution in, the exec round trip, the timing wrapper",
    "verify": "the whole verifier: copying the tests in, running them, reading the reward",
    "tests": "the test command's own run time, timed inside the container",
    "verify_infra": "verify - tests",
    "remove": "seconds the trial waited for its container's removal (near 0 when removed in the background)",
    "remove_engine": "seconds the engine's removal took, on or off the trial's path",
    "end_to_end_overhead": "the trial's whole run_trial time (image lookup, glue) - solve",
    "trials_per_min": "trials / wall time of the whole batch, which includes waiting for every removal",
    "naive_overhead": "wall time of the naive script's trial - solve (its test run included, like overhead)",
}


def summarize(samples: dict[str, list[float]], wall_s: float, n: int, ok: int) -> dict:
    out = {"trials": n, "ok": ok, "wall_s": round(wall_s, 3),
           "trials_per_min": round(60 * n / wall_s, 2) if wall_s else None}
    for name in ("overhead", "sandbox_only"):
        values = samples.get(name, [])
        out[f"{name}_p50_s"], out[f"{name}_p95_s"] = _r(percentile(values, 0.5)), _r(percentile(values, 0.95))
    components = {name: {"p50": _r(percentile(v, 0.5)), "p95": _r(percentile(v, 0.95)), "mean": _r(statistics.fmean(v))}
                  for name, v in samples.items() if name not in ("overhead", "sandbox_only") and v}
    if components:
        out["components_s"] = components
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def run_ours(sandbox: Sandbox, tasks, concurrency: int) -> dict:
    oracle = OracleAgent()
    stats_before = dict(getattr(sandbox, "stats", {}))
    start = time.monotonic()
    results = run_trials(sandbox, [(t, oracle, 0) for t in tasks], concurrency=concurrency, progress=True,
                         description=f"runner  -j{concurrency}")
    wall = time.monotonic() - start
    samples: dict[str, list[float]] = {k: [] for k in (
        "overhead", "sandbox_only", "create", "create_engine", "agent_infra", "verify", "tests", "verify_infra",
        "remove", "remove_engine", "end_to_end_overhead")}
    for r in results:
        if r.error or not r.agent_result:
            continue
        t, solve = r.timings, r.agent_result["solve_s"]
        tests = t.get("tests", 0.0)
        overhead = t["create"] + t["agent"] + t["verify"] + t["remove"] - solve
        row = {"overhead": overhead, "sandbox_only": overhead - tests, "create": t["create"],
               "create_engine": t.get("create_engine", t["create"]), "agent_infra": t["agent"] - solve,
               "verify": t["verify"], "tests": tests, "verify_infra": t["verify"] - tests, "remove": t["remove"],
               "remove_engine": t.get("remove_engine", t["remove"]), "end_to_end_overhead": t["total"] - solve}
        for k, v in row.items():
            samples[k].append(v)
    ok = sum(r.reward == 1.0 for r in results)
    stats = {k: v - stats_before.get(k, 0) for k, v in dict(getattr(sandbox, "stats", {})).items()}
    return summarize(samples, wall, len(results), ok) | {
        "sandbox_stats": stats, "errors": [f"{r.task_id}: {r.error['class']}" for r in results if r.error]}


def naive_trial(task, image: str) -> dict:
    """A fresh container per command, through the docker CLI, as a hand-written script would."""
    env = task.environment
    name = f"termagent-naive-{uuid.uuid4().hex[:12]}"
    limits = ["--memory", f"{env.memory_mb}m", "--cpus", f"{env.cpus:g}", "--pids-limit", "64",
              "--network", "bridge" if env.network else "none", "--label", f"{reaper.LABEL}=1",
              "--label", f"{reaper.OWNER_LABEL}={reaper.owner_id()}"]
    if env.workdir:
        limits += ["--workdir", env.workdir]
    script = task.solve_script
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="termagent-naive-") as logs:
        os.chmod(logs, 0o777)
        solve = (f"s=$(date +%s%N); bash /solution/{shlex.quote(script.name)}; e=$(date +%s%N); "
                 "echo $((e - s)) > /naive-logs/solve_ns")
        subprocess.run(["docker", "run", "--name", name, *limits, "-v", f"{script.parent}:/solution:ro",
                        "-v", f"{logs}:/naive-logs", image, "bash", "-c", solve], capture_output=True, check=False)
        committed = f"{name}:solved"
        subprocess.run(["docker", "commit", name, committed], capture_output=True, check=True)
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        verifier_logs = Path(logs) / "verifier"
        verifier_logs.mkdir()
        os.chmod(verifier_logs, 0o777)
        subprocess.run(["docker", "run", "--rm", *limits, "-v", f"{task.tests_dir}:/tests:ro",
                        "-v", f"{verifier_logs}:/logs/verifier", "-e", "TEST_DIR=/tests", committed,
                        "bash", "-c", task.test_command], capture_output=True, check=False)
        subprocess.run(["docker", "rmi", "-f", committed], capture_output=True, check=False)
        total = time.monotonic() - start
        solve_ns = (Path(logs) / "solve_ns").read_text().strip() if (Path(logs) / "solve_ns").exists() else "0"
        reward_txt = verifier_logs / "reward.txt"
        reward_json = verifier_logs / "reward.json"
        if reward_json.exists():
            reward = json.loads(reward_json.read_text()).get("reward")
        else:
            reward = float(reward_txt.read_text()) if reward_txt.exists() else None
    return {"total": total, "solve_s": int(solve_ns) / 1e9, "reward": reward}


def run_naive(tasks, images: dict, concurrency: int) -> dict:
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(lambda t: naive_trial(t, images[t.id]), tasks))
    wall = time.monotonic() - start
    # The naive script has no separate verifier timing: its sandbox-only figure is left out.
    return summarize({"overhead": [r["total"] - r["solve_s"] for r in results]}, wall, len(results),
                     sum(r["reward"] == 1.0 for r in results))


def docker_run_floor(image: str, n: int = 5) -> float:
    times = []
    for _ in range(n):
        start = time.monotonic()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], capture_output=True,
                       check=True)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def baseline_summary(path: Path, note: str) -> dict:
    """The headline numbers of an earlier run, to read beside this one."""
    data = json.loads(path.read_text())
    keys = ("trials", "ok", "trials_per_min", "overhead_p50_s", "overhead_p95_s", "sandbox_only_p50_s",
            "sandbox_only_p95_s")
    return {"source": str(path), "note": note, "n_tasks": data.get("n_tasks"),
            "load_avg_at_start": data.get("load_avg_at_start"),
            **{name: {c: {k: m.get(k) for k in keys} for c, m in data.get(name, {}).items()}
               for name in ("runner", "naive")}}


def load_suite(paths: list[str]) -> tuple[list, list[str]]:
    """Every loadable task under paths; bad ones are skipped and named (the benchmark is not a validator)."""
    tasks, skipped = [], []
    for task_dir in find_task_dirs(paths):
        result = read_task(task_dir)
        if result.task is None or result.task.solve_script is None:
            skipped.append(task_dir.name)
        else:
            tasks.append(result.task)
    return sorted(tasks, key=lambda t: t.id), skipped


@click.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=REPO / "metrics/bench_sandbox.json")
@click.option("--tasks", "task_paths", multiple=True, default=[str(REPO / "data/tasks")], show_default=True)
@click.option("--concurrency", "concurrencies", default="1,4,8", show_default=True)
@click.option("--limit", type=int, default=None, help="Use only the first N tasks (by id).")
@click.option("--params", "params_file", default=str(REPO / "params.yaml"), show_default=True)
@click.option("--warm-pool", type=int, default=None, help="Override sandbox warm_pool (0: no prestarting).")
@click.option("--no-background-remove", is_flag=True, help="Remove containers on the trial's path.")
@click.option("--skip-naive", is_flag=True, help="Measure the runner only.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="An earlier run's JSON (e.g. of the previous runner) to quote beside this one.")
@click.option("--baseline-note", default="", help="What the baseline run was (code version, conditions).")
def main(out: Path, task_paths: tuple[str, ...], concurrencies: str, limit: int | None, params_file: str,
         warm_pool: int | None, no_background_remove: bool, skip_naive: bool, baseline: Path | None,
         baseline_note: str) -> None:
    console = Console(stderr=True)
    tasks, skipped = load_suite(list(task_paths))
    tasks = tasks[:limit] if limit else tasks
    if not tasks:
        raise click.ClickException(f"no loadable tasks under {task_paths}")
    params = read_sections(params_file, missing_ok=True, sandbox=SandboxParams).sandbox
    base = ensure_base_image(params.base_recipe())
    levels = [int(c) for c in concurrencies.split(",")]
    # Enough container slots for the highest level measured.
    config = dataclasses.replace(params.sandbox_config(base.tag), concurrency=max(levels + [1]))
    overrides = {"warm_pool": warm_pool, "background_remove": False if no_background_remove else None}
    config = dataclasses.replace(config, **{k: v for k, v in overrides.items()
                                            if v is not None and k in config.__dataclass_fields__})
    sandbox = Sandbox(config)
    console.print(f"{len(tasks)} tasks ({len(skipped)} skipped), base {base.tag}; building task images...")
    images = {t.id: sandbox.prepare(t).tag for t in tasks}
    floor = docker_run_floor(base.tag)

    config = {k: v for k, v in dataclasses.asdict(sandbox.config).items() if k != "image_aliases"}
    report = {"definitions": DEFINITIONS, "tasks": [t.id for t in tasks], "skipped": skipped,
              "n_tasks": len(tasks), "cpus": os.cpu_count(), "load_avg_at_start": list(os.getloadavg()),
              "sandbox_config": config, "base_image": base.tag, "docker_run_floor_s": round(floor, 4),
              "runner": {}, "naive": {}}
    for c in levels:
        report["runner"][str(c)] = run_ours(sandbox, tasks, c)
        if not skip_naive:
            console.print(f"naive   -j{c} ...")
            report["naive"][str(c)] = run_naive(tasks, images, c)
    if hasattr(sandbox, "close"):
        sandbox.close()
    report["load_avg_at_end"] = list(os.getloadavg())
    if baseline is not None:
        report["baseline"] = baseline_summary(baseline, baseline_note)

    atomic.write_json(out, report)

    table = Table(title=f"sandbox benchmark: {len(tasks)} tasks, oracle; docker run floor {floor:.2f} s")
    for col in ("approach", "-j", "trials/min", "overhead p50", "p95", "sandbox-only p50", "ok"):
        table.add_column(col, justify="right")
    for c in levels:
        for name in ("runner", "naive"):
            m = report[name].get(str(c))
            if m is None:
                continue
            table.add_row(name, str(c), f"{m['trials_per_min']:.1f}", _s(m["overhead_p50_s"]),
                          _s(m["overhead_p95_s"]), _s(m["sandbox_only_p50_s"]), f"{m['ok']}/{m['trials']}")
    Console().print(table)
    console.print(f"wrote {out}")


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


if __name__ == "__main__":
    main()
