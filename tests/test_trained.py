"""The families an RL stage trained on, from its rollouts (data/rollouts/<stage>/families.json): train tasks only."""

from __future__ import annotations

import json

import pytest

from termagent.tasks.index import build_index, write_index
from termagent.trained import write_trained_families
from tests.tasks.test_split_groups import suite


def test_families_of_the_rollouts_and_a_held_out_task_is_an_error(tmp_path):
    tasks = suite({"alpha": 10, "beta": 10})
    index = build_index(tasks, 0.25, 0, "difficulty", id_fraction=0.2, id_min_per_family=2)
    write_index(index, tmp_path / "tasks.json")
    split = {r["id"]: r["split"] for r in index["tasks"]}
    train = [t for t in sorted(split) if split[t] == "train" and t.startswith("alpha")][:2]
    rollouts = tmp_path / "grpo"
    rollouts.mkdir()
    (rollouts / "rollouts.jsonl").write_text("".join(json.dumps({"task_id": t, "reward": 1.0}) + "\n"
                                                     for t in [*train, train[0]]))
    record = write_trained_families("grpo", rollouts, tmp_path / "tasks.json")
    assert record == {"stage": "grpo", "families": ["alpha"], "tasks": sorted(train), "n_rollouts": 3}
    assert json.loads((rollouts / "families.json").read_text()) == record
    held = next(t for t in sorted(split) if split[t] == "eval_id")
    with (rollouts / "rollouts.jsonl").open("a") as f:
        f.write(json.dumps({"task_id": held}) + "\n")
    with pytest.raises(ValueError, match=f"not train tasks.*{held}"):
        write_trained_families("grpo", rollouts, tmp_path / "tasks.json")
    with pytest.raises(ValueError, match="no rollouts file"):
        write_trained_families("mt_grpo", tmp_path / "missing", tmp_path / "tasks.json")
