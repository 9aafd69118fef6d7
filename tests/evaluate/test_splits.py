"""Eval over split groups: capped selection spread over families, and metrics per group."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from termagent.evaluate.config import EvalConfig
from termagent.evaluate.metrics import compute_metrics
from termagent.evaluate.splits import metrics_by_split, select_held_out
from termagent.params import section
from termagent.tasks.load import load_task

HARBOR = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "harbor-count-errors"


def tasks_and_splits(per_id_family: int = 5):
    """Three training families with per_id_family eval_id instances each, 8 eval_ood instances, 4 hand-written."""
    base = load_task(HARBOR)
    tasks, split_of = [], {}
    k = per_id_family
    for family, group, n in (("a", "eval_id", k), ("b", "eval_id", k), ("c", "eval_id", k), ("z", "eval_ood", 8)):
        for i in range(n):
            t = replace(base, id=f"{family}-{i:04d}", metadata={"family": family})
            tasks.append(t)
            split_of[t.id] = group
    for i in range(4):
        t = replace(base, id=f"hand-{i}", metadata={})
        tasks.append(t)
        split_of[t.id] = "eval"
    return tasks, split_of


def test_caps_spread_over_families():
    tasks, split_of = tasks_and_splits()
    chosen = select_held_out(tasks, split_of, {"eval_id": 4, "eval_ood": 2})
    ids = [t.id for t in chosen]
    id_families = sorted(i[0] for i in ids if split_of[i] == "eval_id")
    assert sorted(set(id_families)) == ["a", "b", "c"] and len(id_families) == 4
    assert sum(split_of[i] == "eval_ood" for i in ids) == 2
    assert sum(split_of[i] == "eval" for i in ids) == 4  # no cap: all
    assert select_held_out(tasks, split_of, {"eval_id": 4, "eval_ood": 2}) == chosen  # deterministic
    assert len(select_held_out(tasks, split_of, {})) == len(tasks)


def test_metrics_by_split_has_the_fields_of_the_whole():
    records = [{"task_id": "a-0000", "attempt": 0, "reward": 1.0}, {"task_id": "a-0000", "attempt": 1, "reward": 0.0},
               {"task_id": "z-0000", "attempt": 0, "reward": 0.0}, {"task_id": "z-0000", "attempt": 1, "reward": 0.0},
               {"task_id": "hand-0", "attempt": 0, "reward": 1.0}, {"task_id": "hand-0", "attempt": 1, "reward": 1.0}]
    split_of = {"a-0000": "eval_id", "z-0000": "eval_ood", "hand-0": "eval"}
    whole = compute_metrics(records, protocol={}, wall_s=1.0)
    by = metrics_by_split(records, split_of, protocol={}, wall_s=1.0)
    assert set(by) == {"eval", "eval_id", "eval_ood"}
    for group in by.values():
        assert set(group) == set(whole)
    assert by["eval"]["accuracy"] == 1.0 and by["eval_ood"]["accuracy"] == 0.0 and by["eval_id"]["accuracy"] == 0.5
    assert by["eval_id"]["per_task"] == {"a-0000": 0.5}


def test_eval_config_split_list_and_legacy_string():
    cfg = section({"eval": {"split": "eval"}}, "eval", EvalConfig)
    assert cfg.split == ["eval"]
    assert EvalConfig().split == ["eval", "eval_id", "eval_ood"]
    with pytest.raises(ValueError):
        EvalConfig(max_per_split={"eval_id": -1})


def test_zero_caps_evaluate_every_eval_id_instance():
    """The H100 profile's caps take every held-out instance of the training families (40 of run 6's 64 could not
    resolve a +0.06 effect; all 64 did) and a sample of 4 from the families never trained on."""
    tasks, split_of = tasks_and_splits(per_id_family=30)
    chosen = select_held_out(tasks, split_of, {"eval": 0, "eval_id": 0, "eval_ood": 4})
    assert sum(split_of[t.id] == "eval_id" for t in chosen) == 90
    assert sum(split_of[t.id] == "eval_ood" for t in chosen) == 4
    assert sum(split_of[t.id] == "eval" for t in chosen) == 4
