"""scripts/seeds_report.py: each seed's comparison and the seeds pooled per task (not counted as more tasks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_run(root: Path, name: str, start: dict[str, int], model: dict[str, int], families: list[str]) -> Path:
    run = root / name
    (run / "eval").mkdir(parents=True)
    for which, scores in (("warmup", start), ("grpo", model)):
        outcomes = {t: {"split": "eval_id", "family": t.rsplit("-", 1)[0], "attempts": {"0": s}, "sampled": {}}
                    for t, s in scores.items()}
        (run / "eval" / f"{which}.details.json").write_text(json.dumps({"primary": "eval_id", "outcomes": outcomes}))
    (run / "trained_families.json").write_text(json.dumps({"grpo": families}))
    return run


def test_each_seed_and_the_pooled_task_means(tmp_path):
    tasks = [f"a-{i}" for i in range(6)] + [f"b-{i}" for i in range(6)]
    base = {t: 0 for t in tasks}
    # seed 0 wins a-0..a-2; seed 1 wins a-0, a-1 and loses b-0
    one = write_run(tmp_path, "s0", base, {**base, "a-0": 1, "a-1": 1, "a-2": 1}, ["a"])
    two = write_run(tmp_path, "s1", {**base, "b-0": 1}, {**base, "a-0": 1, "a-1": 1}, ["a", "b"])
    out = tmp_path / "seeds.json"
    subprocess.run([sys.executable, str(REPO / "scripts/seeds_report.py"), str(one), str(two), "--out", str(out),
                    "--n-resamples", "2000"], check=True, cwd=REPO, capture_output=True)
    doc = json.loads(out.read_text())
    assert doc["runs"]["s0"]["all"]["diff"] == 3 / 12 and doc["runs"]["s0"]["trained"]["n_tasks"] == 6
    assert doc["runs"]["s1"]["all"]["diff"] == 1 / 12 and doc["runs"]["s1"]["trained"]["n_tasks"] == 12
    pooled = doc["pooled"]
    assert pooled["all"]["n_tasks"] == 12  # seeds averaged inside a task, never 24 "tasks"
    assert abs(pooled["all"]["diff"] - (3 / 12 + 1 / 12) / 2) < 1e-12
    assert pooled["families"] == ["a"] and pooled["trained"]["n_tasks"] == 6
    assert abs(pooled["trained"]["diff"] - (1 + 1 + 0.5) / 6) < 1e-12
    assert "pooled, eval_id" in out.with_suffix(".md").read_text()
