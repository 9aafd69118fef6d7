"""The warmup's plan, without training: one full epoch over the demos (every demo exactly once), in an order
where every optimizer step holds the task families in proportion; seeded and deterministic. And one real
tiny-model step in that order."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from termagent.tasks.families import FAMILIES, task_id
from termagent.train.sft import (
    SFTParams,
    example_group,
    family_balanced,
    load_examples,
    planned_examples,
    train_sft,
)
from termagent.train.warmup import WarmupParams


def demo_set() -> tuple[list[list[dict]], list[str | None]]:
    """A demo set shaped like the embedded default's: 12 training families of 15-22 demos, 33 hand-written."""
    ids = [task_id(family, i) for k, family in enumerate(sorted(FAMILIES)[:12]) for i in range(15 + k % 8)]
    ids += [f"bundled-task-{i}" for i in range(33)]
    conversations = [[{"role": "user", "content": f"Task {t}"}, {"role": "assistant", "content": "{}"}] for t in ids]
    return conversations, ids


def test_the_warmup_plan_is_one_full_epoch_balanced_over_families():
    conversations, ids = demo_set()
    groups = [example_group(t) for t in ids]
    params = WarmupParams()
    assert params.max_steps <= 0 and params.trl["num_train_epochs"] == 1.0 and params.order == "family"
    plan = planned_examples(conversations, params, groups)
    assert sorted(map(str, plan)) == sorted(map(str, conversations)), "every demo exactly once"
    group_of = {str(c): g for c, g in zip(conversations, groups)}
    sizes = Counter(groups)
    step = params.per_device_train_batch_size * params.gradient_accumulation_steps
    assert len(plan) == 247 and math.ceil(len(plan) / step) == 31  # one epoch: 31 optimizer steps
    for start in range(0, len(plan), step):  # every step (and every prefix) holds each family in proportion
        prefix = Counter(group_of[str(c)] for c in plan[: start + step])
        for group, n in sizes.items():
            expected = min(start + step, len(plan)) * n / len(plan)
            assert abs(prefix[group] - expected) <= 2, (start, group, prefix[group], expected)
        window = Counter(group_of[str(c)] for c in plan[start: start + step])
        assert max(window.values()) <= 3, window  # no step dominated by one family (33 bundled: ~1 a step)
    assert planned_examples(conversations, params, groups) == plan, "seeded: the same plan every time"
    other = planned_examples(conversations, WarmupParams(seed=1), groups)
    assert other != plan and sorted(map(str, other)) == sorted(map(str, plan))


def test_a_shorter_run_takes_a_balanced_share_and_random_order_is_todays_shuffle():
    conversations, ids = demo_set()
    groups = [example_group(t) for t in ids]
    cut = planned_examples(conversations, WarmupParams(max_steps=10), groups)
    assert len(cut) == 80
    counts = Counter(example_group(c[0]["content"].removeprefix("Task ")) for c in cut)
    for group, n in Counter(groups).items():
        assert abs(counts[group] - 80 * n / len(conversations)) <= 2, (group, counts[group])
    shuffled = planned_examples(conversations, SFTParams(max_steps=-1, order="random"), groups)
    assert sorted(map(str, shuffled)) == sorted(map(str, conversations)) and shuffled != conversations


def test_groups_come_from_task_ids():
    assert example_group("grep-count-0003") == "grep-count"
    assert example_group("access-log-bandwidth") == "bundled"
    assert example_group("grep-count-3") == "bundled"  # not a generated id
    assert example_group("2024-report") == "bundled" and example_group("Sum-0001") == "bundled"
    assert example_group(None) == "unknown"
    assert family_balanced([], [], 0) == []
    with pytest.raises(ValueError, match="order must be one of"):
        SFTParams(order="by-length")


def test_load_examples_keeps_each_rows_task_id(tmp_path):
    path = tmp_path / "demos.jsonl"
    rows = [{"conversations": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
             "task_id": t} for t in ("chmod-mode-0001", "cron-backup")]
    rows.append({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "z"}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    conversations, counts, ids = load_examples([str(path)])
    assert len(conversations) == 3 and counts == {str(path): 3}
    assert ids == ["chmod-mode-0001", "cron-backup", None]


def test_a_real_step_in_the_family_order(tiny_model_dir, tmp_path):
    """The family order trains for real (TRL reads the planned order sequentially) and the metrics say which
    groups the adapter saw."""
    from termagent.train.common import LoraParams

    reply = '{"analysis": "A.", "plan": "P.", "commands": [], "task_complete": true}'
    path = tmp_path / "demos.jsonl"
    ids = ["grep-count-0001", "grep-count-0002", "file-move-0001", "cron-backup"]
    path.write_text("".join(json.dumps({"conversations": [{"role": "user", "content": f"Task {t}"},
                                                          {"role": "assistant", "content": reply}],
                                        "task_id": t}) + "\n" for t in ids))
    params = WarmupParams(datasets=[str(path)], max_length=256, gradient_accumulation_steps=4,
                          lora=LoraParams(r=4, alpha=8),
                          trl={**WarmupParams().trl, "logging_steps": 1, "warmup_steps": 0.0})
    metrics = train_sft(tiny_model_dir, tmp_path / "adapter", params, metrics_dir=tmp_path / "metrics",
                        stage="warmup")
    assert metrics["global_steps"] == 1 and metrics["n_conversations"] == 4  # one epoch of 4 demos, 4 a step
    assert metrics["order"] == "family"
    assert metrics["conversations_by_group"] == {"bundled": 1, "file-move": 1, "grep-count": 2}
    assert metrics["adapter_tensors_changed"] > 0  # one step from B = 0 moves the lora_B tensors
