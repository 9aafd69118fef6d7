"""Split groups: train / eval (hand-written) / eval_id (held-out instances of training families) /
eval_ood (whole held-out families). Disjoint by construction, and stable when families or instances
are added: a task's group depends on its id, its family and the params only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from termagent.tasks.index import build_index, tasks_in_split, write_index
from termagent.tasks.load import load_task
from termagent.tasks.split import HELD_OUT, assign_split_groups, assign_splits

FIXTURES = Path(__file__).parent / "fixtures"
HARBOR = FIXTURES / "harbor-count-errors"
DIFFICULTIES = ("easy", "medium", "hard")


def suite(families: dict[str, int], plain: int = 12) -> list:
    base = load_task(HARBOR)
    tasks = [replace(base, id=f"hand-{i:03d}", metadata={"difficulty": DIFFICULTIES[i % 3]}) for i in range(plain)]
    for family, n in families.items():
        tasks += [replace(base, id=f"{family}-{i:04d}", metadata={"difficulty": DIFFICULTIES[i % 3], "family": family})
                  for i in range(n)]
    return tasks


def test_groups():
    tasks = suite({"alpha": 30, "beta": 30, "gamma": 20})
    split = assign_split_groups(tasks, 0.25, 0, "difficulty", id_fraction=0.2, ood_families=["gamma"])
    assert set(split.values()) == {"train", "eval", "eval_id", "eval_ood"}
    assert all(split[f"gamma-{i:04d}"] == "eval_ood" for i in range(20))
    for family in ("alpha", "beta"):
        groups = [split[f"{family}-{i:04d}"] for i in range(30)]
        assert set(groups) == {"train", "eval_id"}
        assert 2 <= groups.count("eval_id") <= 12  # about id_fraction of 30
    # hand-written tasks: exactly the old train/eval split, whatever the generated tasks
    plain = [t for t in tasks if "family" not in t.metadata]
    assert {t.id: split[t.id] for t in plain} == assign_splits(plain, 0.25, 0, "difficulty")
    assert set(HELD_OUT) == {"eval", "eval_id", "eval_ood"}


def test_stable_when_families_or_instances_are_added():
    kw = {"eval_fraction": 0.25, "seed": 0, "stratify_by": "difficulty", "id_fraction": 0.2,
          "ood_families": ["gamma", "delta"]}
    before = assign_split_groups(suite({"alpha": 20, "gamma": 10}), **kw)
    after = assign_split_groups(suite({"alpha": 200, "beta": 50, "gamma": 30, "delta": 10}, plain=12), **kw)
    assert {t: after[t] for t in before} == before
    assert sum(v == "eval_id" for t, v in after.items() if t.startswith("alpha")) > 20


def test_one_family_task_still_gets_both_sides():
    split = assign_split_groups(suite({"alpha": 3}, plain=0), 0.25, 0, None, id_fraction=0.01, ood_families=[])
    assert sorted(split.values()).count("eval_id") == 1 and "train" in split.values()


def test_index_lists_and_filters_groups(tmp_path):
    from termagent.tasks.families import generate, instance_rng

    for family in ("grep-count", "sqlite-query"):
        for i in range(6):
            generate(family, instance_rng(0, family, i), i, tmp_path / "gen")
    from termagent.tasks.load import discover_tasks

    tasks = discover_tasks([tmp_path / "gen"])
    index = build_index(tasks, 0.25, 0, "difficulty", root=tmp_path, id_fraction=0.3, ood_families=["sqlite-query"])
    write_index(index, tmp_path / "tasks.json")
    assert index["counts"]["eval_ood"] == 6 and index["counts"]["train"] + index["counts"]["eval_id"] == 6
    assert {r["family"] for r in index["tasks"]} == {"grep-count", "sqlite-query"}
    held = tasks_in_split(tmp_path / "tasks.json", ["eval_id", "eval_ood"], root=tmp_path)
    train = tasks_in_split(tmp_path / "tasks.json", "train", root=tmp_path)
    assert len(held) + len(train) == 12 and not {t.id for t in held} & {t.id for t in train}


def test_every_training_family_gets_at_least_id_min_per_family_held_out_instances():
    """issue 41: >= 8 held-out instances per family to measure a gain on; the lowest hash points move, one
    train instance always stays, and the ood and hand-written tasks do not move."""
    tasks = suite({"alpha": 24, "beta": 10, "tiny": 3, "gamma": 5})
    plain = assign_split_groups(tasks, 0.25, 0, "difficulty", id_fraction=0.2, ood_families=["gamma"])
    split = assign_split_groups(tasks, 0.25, 0, "difficulty", id_fraction=0.2, ood_families=["gamma"],
                                id_min_per_family=8)

    def held(s, family, n):
        return [i for i in range(n) if s[f"{family}-{i:04d}"] == "eval_id"]

    assert len(held(split, "alpha", 24)) == 8 == len(held(split, "beta", 10)) and len(held(plain, "alpha", 24)) < 8
    assert set(held(plain, "alpha", 24)) <= set(held(split, "alpha", 24))  # only train instances moved
    assert len(held(split, "tiny", 3)) == 2  # one train instance kept
    assert {t: g for t, g in split.items() if not t.startswith(("alpha", "beta", "tiny"))} == {
        t: g for t, g in plain.items() if not t.startswith(("alpha", "beta", "tiny"))}
    index = build_index(tasks, 0.25, 0, "difficulty", id_fraction=0.2, ood_families=["gamma"], id_min_per_family=8)
    assert index["id_min_per_family"] == 8 and index["counts"]["eval_id"] == 18
