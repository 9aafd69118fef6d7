"""The stage scripts that no dvc.yaml stage runs yet (datasets, curate) run as DVC would run them:
`python stages/<name>.py ...` in a subprocess, on the repository's params.yaml and task index, from
synthetic GRPO rollouts. Also: a profile is read layered (`--profile`), never as a whole file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from termagent.datasets import OUTPUT_FILES
from termagent.datasets.synthetic import SynthConfig, generate_rollouts
from termagent.judge import load_task_contexts

REPO = Path(__file__).resolve().parents[1]


def stage(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rollouts") / "rollouts.jsonl"
    tasks = list(load_task_contexts([REPO / "data/tasks"]).values())
    generate_rollouts(tasks, path, SynthConfig(n=320, generations=4, tasks_per_step=8, seed=0))
    return path


def test_datasets_stage_writes_the_six_datasets(rollouts, tmp_path):
    out = tmp_path / "datasets"
    result = stage("stages/build_datasets.py", "--rollouts", str(rollouts), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert set(OUTPUT_FILES) <= {p.name for p in out.glob("*.jsonl")}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["sft.jsonl"] > 0 and "judge rules" in result.stdout


def test_curate_stage_never_selects_an_eval_task(rollouts, tmp_path):
    out = tmp_path / "curated"
    result = stage("stages/curate.py", "--rollouts", str(rollouts), "--index", "data/tasks.json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    selected = {t["id"] for t in json.loads((out / "rl_tasks_mt.json").read_text())["tasks"]}
    index = json.loads((REPO / "data/tasks.json").read_text())["tasks"]
    evals = {t["id"] for t in index if t["split"] == "eval"}
    assert selected and not selected & evals


def test_a_stage_reads_a_profile_layered_over_params(tmp_path):
    # h100 changes no tasks key: the index is the embedded one, byte for byte.
    out = tmp_path / "tasks.json"
    result = stage("stages/tasks.py", "--out", str(out), "--profile", "h100")
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == (REPO / "data/tasks.json").read_bytes()
    bad = stage("stages/tasks.py", "--out", str(out), "--profile", "nosuch")
    assert bad.returncode != 0 and "no such profile" in bad.stderr
