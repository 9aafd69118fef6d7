"""Dynamic sampling in GRPO (DAPO): a group whose replies all pass or all fail carries no advantage; it is
replaced by a fresh group of another task when that one holds a pass and a fail. Unit tests of the splice on
TRL's scored-batch tensors, and a real run (TRL GRPOTrainer, the warm tiny model, real containers) on a task
nobody can solve next to two the warm model solves sometimes."""

from __future__ import annotations

import json

import pytest
import torch

from termagent.rollouts import iter_jsonl
from termagent.train.grpo import GRPOPaths, TieLedger, has_signal, splice_groups, train_grpo
from termagent.train.single_turn import EnvConfig, Outcome
from tests.grpo.conftest import write_task
from tests.grpo.test_train import small_config


def outcome(passed: bool | None) -> Outcome:
    return Outcome("t", "", parse_ok=True, format_ok=True, truncated=False, executed=True, exec_rc=0,
                   script_ok=True, verifier_reward=None if passed is None else float(passed),
                   reward=None if passed is None else float(passed))


def test_a_group_carries_signal_only_with_a_scored_pass_and_a_scored_fail():
    assert has_signal([outcome(True), outcome(False)])
    assert not has_signal([outcome(True), outcome(True)]) and not has_signal([outcome(False)] * 4)
    assert not has_signal([outcome(True), outcome(None)])  # an infrastructure failure is not a fail


def test_splice_replaces_whole_groups_padding_prompts_left_and_completions_right():
    pad = 0
    out = {"prompt_ids": torch.tensor([[5, 6], [5, 6], [7, 8], [7, 8]]),
           "prompt_mask": torch.ones(4, 2, dtype=torch.long),
           "completion_ids": torch.tensor([[1, 2], [1, 2], [3, 4], [3, 4]]),
           "completion_mask": torch.ones(4, 2, dtype=torch.long),
           "old_per_token_logps": torch.full((4, 2), -1.0),
           "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0]), "num_items_in_batch": torch.tensor(8)}
    new = {"prompt_ids": torch.tensor([[9, 9, 9], [9, 9, 9]]), "prompt_mask": torch.ones(2, 3, dtype=torch.long),
           "completion_ids": torch.tensor([[4, 4, 4], [4, 0, 0]]),
           "completion_mask": torch.tensor([[1, 1, 1], [1, 0, 0]]),
           "old_per_token_logps": torch.full((2, 3), -2.0),
           "advantages": torch.tensor([0.5, -0.5]), "num_items_in_batch": torch.tensor(4)}
    splice_groups(out, new, 0, 0, 2, pad_id=pad)
    assert out["prompt_ids"].tolist() == [[9, 9, 9], [9, 9, 9], [pad, 7, 8], [pad, 7, 8]]
    assert out["prompt_mask"].tolist() == [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 1, 1]]
    assert out["completion_ids"].tolist() == [[4, 4, 4], [4, 0, 0], [3, 4, pad], [3, 4, pad]]
    assert out["completion_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 0]]
    assert out["old_per_token_logps"][2].tolist() == [-1.0, -1.0, 0.0]
    assert out["advantages"].tolist() == [0.5, -0.5, 1.0, -1.0]
    assert out["num_items_in_batch"].item() == 8  # a scalar: the trainer recomputes it from the masks


def rows(*task_ids: str, g: int = 2) -> list[dict]:
    return [{"task_id": t, "prompt": f"p-{t}"} for t in task_ids for _ in range(g)]


def test_a_task_tied_limit_times_leaves_the_draw_and_its_groups_are_swapped_for_live_tasks():
    import random

    ledger = TieLedger(2)
    for signal in (False, True, False):  # a group with signal does not count against the task
        ledger.record("solved", signal)
    ledger.record("half", False)
    assert ledger.retired() == ["solved"] and ledger.is_retired("solved") and not ledger.is_retired("half")
    pool = rows("half", "solved", "fresh-a", "fresh-b", g=1)
    assert [r["task_id"] for r in ledger.live(pool)] == ["half", "fresh-a", "fresh-b"]
    swapped = ledger.swap_retired(rows("solved", "half"), 2, pool, random.Random(0))
    ids = [r["task_id"] for r in swapped]
    assert ids[0] == ids[1] and ids[0] in {"fresh-a", "fresh-b"} and ids[2:] == ["half", "half"]
    assert swapped[0]["prompt"] == f"p-{ids[0]}"
    # no live task left to swap in: the group stays (a step is never left short); 0 turns the filter off
    assert ledger.swap_retired(rows("solved"), 2, rows("solved", g=1), random.Random(0)) == rows("solved")
    off = TieLedger(0)
    off.record("solved", False)
    off.record("solved", False)
    assert off.retired() == [] and off.live(pool) == pool
    # training ends once nothing is left to draw (every task retired); never with retirement off or no pool
    assert not ledger.exhausted(pool) and ledger.exhausted(rows("solved", g=1))
    assert not off.exhausted(rows("solved", g=1)) and not ledger.exhausted([])


def test_the_ledger_is_rebuilt_from_the_logged_groups_on_resume(tmp_path):
    log = tmp_path / "rollouts.jsonl"
    groups = [("a", [1.0, 1.0]), ("b", [1.0, 0.0]), ("a", [1.0, None]), ("c", [None, None]), ("a", [0.0, 0.0])]
    log.write_text("".join(json.dumps({"task_id": t, "reward": r, "verifier_reward": r}) + "\n"
                           for t, rewards in groups for r in rewards))
    ledger = TieLedger.from_rollouts(log, 2, 2)
    assert ledger.ties == {"a": 3} and ledger.retired() == ["a"]  # c: every reply infrastructure, no verdict
    assert TieLedger.from_rollouts(tmp_path / "none.jsonl", 2, 2).ties == {}


def first_index_seed(n: int, index: int) -> int:
    """A seed whose first draw of TRL's RepeatSampler (torch.randperm(n) under a generator seeded with it,
    trl/trainer/utils.py) is `index`."""
    for seed in range(100):
        if torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()[0] == index:
            return seed
    raise AssertionError("no such seed")


@pytest.mark.docker
@pytest.mark.slow
def test_a_group_without_signal_is_resampled_from_another_task(tmp_path, base_image, task_root, tasks,
                                                                 warm_adapter, grpo_sandbox):
    from termagent.tasks.load import load_task

    never = load_task(write_task(tmp_path / "tasks", "write-never", base_image.tag, word="zzz-unwritten"))
    all_tasks = sorted([*tasks, never], key=lambda t: t.id)  # write-hello, write-never, write-world
    seed = first_index_seed(3, [t.id for t in all_tasks].index("write-never"))
    paths = GRPOPaths(warmup=warm_adapter, out=tmp_path / "grpo", rollouts_dir=tmp_path / "rollouts",
                      checkpoints=tmp_path / "ckpt", metrics_dir=tmp_path / "metrics")
    config = small_config(gradient_accumulation_steps=1, max_steps=1, seed=seed, max_resamples=1)
    m = train_grpo(config, paths, tasks=all_tasks, sandbox=grpo_sandbox, env_config=EnvConfig(), progress=False)
    rows = list(iter_jsonl(paths.rollouts_dir / "rollouts.jsonl"))
    drawn = [r for r in rows if r["resample"] == 0]
    again = [r for r in rows if r["resample"] == 1]
    assert {r["task_id"] for r in drawn} == {"write-never"} and all(r["verifier_reward"] < 1 for r in drawn)
    assert len(again) == 4 and {r["task_id"] for r in again} <= {"write-hello", "write-world"}
    (step,) = [json.loads(line) for line in (paths.rollouts_dir / "steps.jsonl").read_text().splitlines()]
    replaced = 0 < sum(r["verifier_reward"] >= 1 for r in again) < 4
    assert step["resampled_groups"] == int(replaced)
    assert step["signal_groups_frac"] == float(replaced)  # the trained batch is the replacement when it had signal
    assert m["trained_groups_signal_frac"] == float(replaced) and m["resampled_groups"] == int(replaced)
    assert m["groups"] == 2 and m["steps"] == 1


@pytest.mark.docker
@pytest.mark.slow
def test_training_ends_once_every_task_is_retired(tmp_path, base_image, warm_adapter, grpo_sandbox):
    """A task the policy never solves ties on its first group and is retired (retire_after_ties 1): nothing is
    left to draw, so the run ends after that step instead of generating two more tied, skipped steps."""
    from termagent.tasks.load import load_task

    never = load_task(write_task(tmp_path / "tasks", "write-never", base_image.tag, word="zzz-unwritten"))
    paths = GRPOPaths(warmup=warm_adapter, out=tmp_path / "grpo", rollouts_dir=tmp_path / "rollouts",
                      checkpoints=tmp_path / "ckpt", metrics_dir=tmp_path / "metrics")
    config = small_config(gradient_accumulation_steps=1, max_steps=3, retire_after_ties=1)
    m = train_grpo(config, paths, tasks=[never], sandbox=grpo_sandbox, env_config=EnvConfig(), progress=False)
    assert m["steps"] == 1 and m["stopped_early"] == "every task retired"
    assert m["skipped_steps"] == 1 and m["retired_tasks"] == 1 and m["groups"] == 1
    assert (paths.out / "adapter_config.json").is_file()
