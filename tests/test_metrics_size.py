"""The DVC metrics stay small enough to read (issue 43): each eval's metrics file and metrics/summary.json are a few
numbers, `dvc metrics diff` between two runs whose every number changed fits a screen, and the `dvc exp show`
invocation docs/dvc.md and docs/evaluation.md give prints a table of a dozen columns. Real DVC in a scratch git repo
holding this params.yaml and metrics files written by the eval and report code."""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

from termagent.evaluate.config import EvalConfig, evaluated_models
from termagent.evaluate.outputs import eval_details, metric_numbers
from termagent.report.build import build_summary, metrics_view
from termagent.report.gains import family_gains

REPO = Path(__file__).resolve().parents[1]
DVC = str(Path(sys.executable).with_name("dvc"))
FAMILIES = [f"family-{i}" for i in range(12)]
MAX_EVAL_LEAVES = 16
MAX_SUMMARY_LEAVES = 24


def numeric_leaves(doc) -> list[str]:
    if isinstance(doc, dict):
        return [f"{k}.{leaf}" for k, v in doc.items() for leaf in numeric_leaves(v)] or []
    return [""] if isinstance(doc, int | float) and not isinstance(doc, bool) else []


def an_eval(model: str, rng: random.Random) -> dict:
    """The details of a local eval with the default groups: 96 eval_id tasks (8 per family), 10 eval, 4 eval_ood;
    one greedy attempt, and 2 sampled on eval_id for every model but the base."""
    split_of = {**{f"{f}-{i}": "eval_id" for f in FAMILIES for i in range(8)},
                **{f"hand-{i}": "eval" for i in range(10)}, **{f"ood-{i}": "eval_ood" for i in range(4)}}
    groups = EvalConfig().models.get(model) or EvalConfig().final
    records = []
    for task, group in split_of.items():
        if group not in groups:
            continue
        n_sampled = 2 if group == "eval_id" and EvalConfig().sampled.applies_to(model) else 0
        for attempt in range(1 + n_sampled):
            records.append({"task_id": task, "attempt": attempt, "reward": float(rng.random() < 0.3),
                            "mode": "sampled" if attempt else "eval", "n_turns": rng.randint(1, 8),
                            "ended_by": rng.choice(["task_complete", "max_turns", "timeout"]),
                            "tokens": {"in": rng.randint(500, 3000), "out": rng.randint(20, 200)}, "turns": []})
    return eval_details(records, model=model, protocol={"temperature": 0.0}, wall_s=rng.uniform(100, 900),
                        split_of=split_of, families={t: t.rsplit("-", 1)[0] for t in split_of},
                        sampled={"attempts": 2})


def a_run(seed: int) -> dict[str, dict]:
    """{path: metrics} of one run: every eval's numbers and metrics/summary.json."""
    rng = random.Random(seed)
    details = {m: an_eval(m, rng) for m in evaluated_models(EvalConfig())}
    summary = build_summary(details, base="base", n_resamples=200, confidence=0.95, seed=0)
    summary["gains"] = family_gains(details, {"grpo": FAMILIES[:3], "mt_grpo": FAMILIES[:1]}, n_resamples=200,
                                    confidence=0.95, seed=0)
    return {**{f"metrics/eval/{m}.json": metric_numbers(d) for m, d in details.items()},
            "metrics/summary.json": metrics_view(summary)}


def test_each_metrics_file_is_a_few_numbers():
    run = a_run(0)
    for path, doc in run.items():
        leaves = numeric_leaves(doc)
        bound = MAX_SUMMARY_LEAVES if path.endswith("summary.json") else MAX_EVAL_LEAVES
        assert 5 <= len(leaves) <= bound, (path, leaves)
        assert all(not isinstance(v, str) for v in json.loads(json.dumps(doc)).values()), path  # no text


def documented_exp_show() -> list[str]:
    """The `dvc exp show ...` line of docs/dvc.md, which docs/evaluation.md repeats verbatim."""
    lines = [line.strip() for line in (REPO / "docs/dvc.md").read_text().splitlines()
             if line.strip().startswith("dvc exp show --only-changed")]
    assert len(lines) == 1, lines
    assert lines[0] in (REPO / "docs/evaluation.md").read_text()
    return shlex.split(lines[0].split("  #")[0])


def test_metrics_diff_fits_a_screen_and_exp_show_a_table(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    def write_run(seed):
        for path, doc in a_run(seed).items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(json.dumps(doc, indent=2))

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    write_run(0)
    (tmp_path / "dvc.yaml").write_text("metrics:\n" + "".join(f"  - {p}\n" for p in sorted(a_run(0))))
    subprocess.run([DVC, "init", "-q"], cwd=tmp_path, check=True)
    git("add", "-A")
    git("commit", "-qm", "run 0")
    write_run(1)  # another seed: every number may change
    diff = subprocess.run([DVC, "metrics", "diff"],
                          cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    rows = [line for line in diff.splitlines() if line.strip()]
    print(f"dvc metrics diff: {len(rows)} rows")
    assert 20 <= len(rows) <= 66, diff
    assert max(len(line) for line in rows) <= 120, diff
    git("add", "-A")
    git("commit", "-qm", "run 1")
    argv = documented_exp_show()
    table = subprocess.run([DVC, *argv[1:], "--csv"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    columns = table.splitlines()[0].split(",")
    assert "Experiment" in columns and "seed" in columns, columns
    accuracy = [c for c in columns if re.fullmatch(r"metrics/eval/\w+\.json:accuracy", c)]
    assert len(accuracy) == len(evaluated_models(EvalConfig())), columns
    assert any(c.startswith("trained_families.grpo.") for c in columns), columns
    assert len(columns) <= 16, columns
