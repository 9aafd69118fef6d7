"""The train/eval split and the index: deterministic, stable as tasks are added, written atomically."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from termagent.params import ParamsError, section
from termagent.tasks.cli import tasks as tasks_cli
from termagent.tasks.index import (
    TasksConfig,
    build_index,
    index_json,
    read_index,
    tasks_in_split,
    write_index,
)
from termagent.tasks.load import load_task
from termagent.tasks.model import TaskError
from termagent.tasks.split import assign_splits, unit_hash

FIXTURES = Path(__file__).parent / "fixtures"
HARBOR = FIXTURES / "harbor-count-errors"
TB1 = FIXTURES / "tb1-sum-numbers"
REPO = Path(__file__).resolve().parents[2]
DIFFICULTIES = ("easy", "medium", "hard")


def fake_suite(n: int, prefix: str = "task") -> list:
    """n Task objects differing in id and difficulty (the split looks at nothing else)."""
    base = load_task(HARBOR)
    return [replace(base, id=f"{prefix}-{i:03d}", metadata={"difficulty": DIFFICULTIES[i % 3]}) for i in range(n)]


def test_split_is_deterministic_and_near_the_fraction():
    suite = fake_suite(200)
    a = assign_splits(suite, 0.25, seed=0)
    assert a == assign_splits(list(reversed(suite)), 0.25, seed=0)  # order does not matter
    n_eval = sum(s == "eval" for s in a.values())
    assert 30 <= n_eval <= 70  # 200 * 0.25 = 50, binomial sd ~6
    assert assign_splits(suite, 0.25, seed=1) != a  # the seed matters
    assert unit_hash(0, "task-000") == unit_hash(0, "task-000") and 0 <= unit_hash(0, "x") < 1


def test_adding_tasks_never_moves_another():
    suite = fake_suite(40)
    before = assign_splits(suite, 0.25, seed=0, stratify_by="difficulty")
    after = assign_splits(suite + fake_suite(25, prefix="new"), 0.25, seed=0, stratify_by="difficulty")
    assert {i: after[i] for i in before} == before


@pytest.mark.parametrize("n", [2, 3, 5])
def test_small_suites_get_one_eval_and_one_train_task(n):
    for seed in range(20):
        splits = assign_splits(fake_suite(n), 0.01, seed=seed).values()
        assert "eval" in splits and "train" in splits
        splits = assign_splits(fake_suite(n), 0.99, seed=seed).values()
        assert "eval" in splits and "train" in splits
    assert list(assign_splits(fake_suite(1), 0.25, seed=0).values()) in (["train"], ["eval"])


def test_stratified_split_covers_every_difficulty():
    suite = fake_suite(12)  # 4 tasks per difficulty
    for seed in range(30):
        splits = assign_splits(suite, 0.1, seed=seed, stratify_by="difficulty")
        for difficulty in DIFFICULTIES:
            sides = {splits[t.id] for t in suite if t.difficulty == difficulty}
            assert sides == {"train", "eval"}, (seed, difficulty)


def test_split_rejects_bad_parameters():
    with pytest.raises(ValueError, match="eval_fraction"):
        assign_splits(fake_suite(3), 1.0, seed=0)
    with pytest.raises(ValueError, match="stratify_by"):
        assign_splits(fake_suite(3), 0.5, seed=0, stratify_by="colour")


def test_index_records_and_determinism(tmp_path):
    tasks = [load_task(HARBOR), load_task(TB1)]
    index = build_index(tasks, 0.5, 0, "difficulty", root=REPO)
    assert index_json(index) == index_json(build_index(list(reversed(tasks)), 0.5, 0, "difficulty", root=REPO))
    assert [r["id"] for r in index["tasks"]] == ["tb1-sum-numbers", "termagent-fixtures/count-errors"]
    assert index["counts"] == {"eval": 1, "train": 1}
    harbor = index["tasks"][1]
    assert harbor == {
        "id": "termagent-fixtures/count-errors", "family": None, "rung": None, "hash": tasks[0].content_hash, "layout": "harbor",
        "split": harbor["split"], "path": "tests/tasks/fixtures/harbor-count-errors", "difficulty": "easy",
        "category": "text_processing", "tags": ["grep", "logs"], "agent_timeout_sec": 120.0,
        "verifier_timeout_sec": 60.0, "network": "no-network"}
    assert index["tasks"][0]["network"] == "public" and index["tasks"][0]["layout"] == "tb1"

    out = write_index(index, tmp_path / "data" / "tasks.json")
    assert read_index(out) == index
    assert list(out.parent.iterdir()) == [out]  # no temporary left behind
    assert set(index) == {"version", "eval_fraction", "split_seed", "stratify_by", "id_fraction", "id_min_per_family",
                          "ood_families", "counts", "tasks"}  # no timestamp

    eval_tasks = tasks_in_split(out, "eval", root=REPO)
    assert len(eval_tasks) == 1 and eval_tasks[0].id in {t.id for t in tasks}
    assert len(tasks_in_split(out, None, root=REPO)) == 2


def test_tasks_in_split_refuses_a_stale_index(tmp_path, copy_task):
    d = copy_task(HARBOR)
    out = write_index(build_index([load_task(d)], 0.5, 0, root=tmp_path), tmp_path / "tasks.json")
    (d / "instruction.md").write_text("Changed.\n")
    with pytest.raises(TaskError, match="stale"):
        tasks_in_split(out, None, root=tmp_path)


def test_stage_writes_the_same_bytes_twice(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(f"tasks:\n  dirs: [{HARBOR}, {TB1}]\n  eval_fraction: 0.5\n  split_seed: 3\n"
                      "  stratify_by: null\n")
    outs = []
    for name in ("a.json", "b.json"):
        proc = subprocess.run([sys.executable, "stages/tasks.py", "--params", str(params), "--out", str(tmp_path / name)],
                              cwd=REPO, check=False, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    index = json.loads(outs[0])
    assert (index["eval_fraction"], index["split_seed"], index["stratify_by"]) == (0.5, 3, None)
    assert [r["path"] for r in index["tasks"]] == ["tests/tasks/fixtures/tb1-sum-numbers",
                                                   "tests/tasks/fixtures/harbor-count-errors"]


def test_stage_reports_a_bad_param(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("tasks:\n  dirs: [data/tasks]\n  eval_fraction: lots\n  split_seed: 0\n")
    proc = subprocess.run([sys.executable, "stages/tasks.py", "--params", str(params), "--out", str(tmp_path / "x.json")],
                          cwd=REPO, check=False, capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"{params}: tasks.eval_fraction must be float" in proc.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("fraction", [0, 1, 1.5])
def test_tasks_config_rejects_an_eval_fraction_outside_0_1(fraction):
    with pytest.raises(ParamsError, match=rf"^params.yaml: tasks: eval_fraction must be > 0 and < 1, got {fraction}"):
        section({"tasks": {"eval_fraction": fraction}}, "tasks", TasksConfig)


def test_validate_command_prints_every_problem_and_exits_1(copy_task):
    good = copy_task(HARBOR, "good")
    bad = copy_task(HARBOR, "bad")
    (bad / "instruction.md").unlink()
    (bad / "tests" / "test.sh").unlink()
    (bad / "task.toml").write_text('[task]\nname = "other/name"\n[agent]\ntimeout_sec = "abc"\n')
    result = CliRunner().invoke(tasks_cli, ["validate", str(good.parent)])
    assert result.exit_code == 1
    assert f"ok   {good.resolve()}" in result.output
    assert f"FAIL {bad.resolve()}" in result.output
    for problem in ('task.toml: [agent].timeout_sec must be a positive number, got "abc"',
                    "instruction.md: missing", "tests/test.sh: missing"):
        assert f"error: {problem}" in result.output

    result = CliRunner().invoke(tasks_cli, ["validate", str(good)])
    assert result.exit_code == 0, result.output


def test_index_command(tmp_path):
    out = tmp_path / "tasks.json"
    result = CliRunner().invoke(tasks_cli, ["index", str(FIXTURES), "--out", str(out), "--eval-fraction", "0.5"])
    assert result.exit_code == 0, result.output
    assert len(read_index(out)["tasks"]) == 2
