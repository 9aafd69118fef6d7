"""glibc's default malloc vs the heap setting (termagent/allocator.py), in one run: the warmup's own training loop.

    python scripts/bench_allocator.py --out metrics/bench_allocator.json          (make bench-allocator)

Each round trains `train_sft` with the warmup's params (params.yaml, `--profile` merged) for `--steps` optimizer
steps on the first `--examples` demos of data/sft/demos.jsonl, from models/base, in a fresh process with
`TERMAGENT_MALLOC` = system or heap; the modes alternate (system, heap, system, ...) so a load change on a shared
machine hits both alike. Per round: the training phase's wall time and trained tokens/s (from the run's own
metrics), and the child process's user and system CPU seconds (`getrusage`), its peak resident set and the load
average. A benchmark, not a test: nothing asserts on the times.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
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


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=None, help="metrics/bench_allocator.json")
@click.option("--params", "params_file", default="params.yaml", show_default=True)
@click.option("--profile", default=None)
@click.option("--examples", default=16, show_default=True, help="demos trained on (from the top of the file)")
@click.option("--steps", default=2, show_default=True, help="optimizer steps per round")
@click.option("--repeats", default=2, show_default=True, help="rounds per mode")
@click.option("--child-mode", type=click.Choice(MODES), default=None, hidden=True)
@click.option("--child-result", default=None, hidden=True)
def main(out, params_file, profile, examples, steps, repeats, child_mode, child_result):
    if child_mode:
        child(params_file, profile, examples, steps, child_result)
        return
    if not (REPO / "models" / "base" / "config.json").is_file():
        raise click.ClickException("models/base is missing: run `dvc repro base_model` first")
    rounds = []
    for r in range(repeats):
        for mode in MODES:
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                result_path = f.name
            env = {**os.environ, "TERMAGENT_MALLOC": mode, "PYTHONPATH": str(REPO)}
            cmd = [sys.executable, __file__, "--params", params_file, "--examples", str(examples),
                   "--steps", str(steps), "--child-mode", mode, "--child-result", result_path]
            if profile:
                cmd += ["--profile", profile]
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            subprocess.run(cmd, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
            row = {"round": r, "mode": mode, "wall_s": round(time.monotonic() - t0, 2), "load_before": load,
                   **json.loads(Path(result_path).read_text())}
            os.unlink(result_path)
            rounds.append(row)
            click.echo(f"round {r} {mode:6s}: {row['tokens_per_s']} trained tokens/s, user {row['user_s']} s, "
                       f"sys {row['sys_s']} s, peak RSS {row['max_rss_mib']} MiB")
    summary = {}
    for mode in MODES:
        rows = [x for x in rounds if x["mode"] == mode]
        summary[mode] = {"tokens_per_s_median": statistics.median(x["tokens_per_s"] for x in rows),
                         "sys_s_median": statistics.median(x["sys_s"] for x in rows),
                         "user_s_median": statistics.median(x["user_s"] for x in rows),
                         "max_rss_mib_max": max(x["max_rss_mib"] for x in rows)}
    summary["heap_over_system"] = round(summary["heap"]["tokens_per_s_median"]
                                        / summary["system"]["tokens_per_s_median"], 3)
    result = {"what": "the warmup's train_sft, glibc malloc defaults vs allocator.py's heap setting",
              "examples": examples, "steps": steps, "repeats": repeats, "cpu_count": os.cpu_count(),
              "summary": summary, "rounds": rounds}
    click.echo(json.dumps(summary, indent=1))
    if out:
        atomic.write_json(out, result)


if __name__ == "__main__":
    main()
