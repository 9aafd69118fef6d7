"""Datasets from sampled multi-turn trajectories: verified passes for SFT, pass/fail pairs at the turn where
two episodes of one task part (termagent/datasets/trajectories.py), read as DPO reads them."""

from __future__ import annotations

import json

from termagent.datasets.trajectories import divergent_pair, rft_rows, turn_pairs
from termagent.train.dpo import to_preference

PROMPT = {"role": "user", "content": "Task: make /app/run.sh executable.\n$ "}


def ep(task, attempt, replies_obs, passed, ended_by="task_complete"):
    conv = [PROMPT]
    for reply, obs in replies_obs:
        conv.append({"role": "assistant", "content": reply})
        if obs is not None:
            conv.append({"role": "user", "content": obs})
    return {"task_id": task, "attempt": attempt, "reward": 1.0 if passed else 0.0, "passed": passed,
            "ended_by": ended_by, "n_turns": len(replies_obs), "conversation": conv}


LS = ("ls -l /app", "-rw-r--r-- run.sh\n$ ")
CHMOD = ("chmod +x /app/run.sh", "$ ")
WRONG = ("chmod 600 /app/run.sh", "$ ")
DONE = ("done", "Are you sure?")
CONFIRM = ("done, sure", None)


def test_pairs_are_taken_at_the_first_reply_where_a_pass_and_a_fail_part():
    passing = ep("t1", 0, [LS, CHMOD, DONE, CONFIRM], True)
    failing = ep("t1", 1, [LS, WRONG, DONE, CONFIRM], False)
    rows, counts = turn_pairs([passing, failing])
    assert counts["pairs"] == 1 and counts["tasks_with_both"] == 1
    (row,) = rows
    assert row["turn"] == 1  # the shared first reply (ls) and its observation are the prompt
    assert row["prompt"] == passing["conversation"][:3]
    assert row["chosen"] == [{"role": "assistant", "content": "chmod +x /app/run.sh"}]
    assert row["rejected"] == [{"role": "assistant", "content": "chmod 600 /app/run.sh"}]
    # DPO reads the row as written: one diverging assistant turn each side, the shared history as prompt
    pref = to_preference(json.loads(json.dumps(row)), "row")
    assert pref == {"prompt": row["prompt"], "chosen": row["chosen"], "rejected": row["rejected"]}


def test_a_pair_whose_environment_answered_differently_is_skipped_and_counted():
    passing = ep("t1", 0, [LS, CHMOD, DONE, CONFIRM], True)
    other_screen = ep("t1", 1, [("ls -l /app", "total 0\n$ "), WRONG], False)
    rows, counts = turn_pairs([passing, other_screen])
    assert rows == [] and counts["environment_diverged"] == 1


def test_tasks_without_both_outcomes_give_no_pair_and_pairs_are_capped_and_distinct():
    only_pass = [ep("a", i, [CHMOD, DONE, CONFIRM], True) for i in range(3)]
    mixed = [ep("b", 0, [CHMOD, DONE, CONFIRM], True), ep("b", 1, [("echo x", "x\n$ ")], True),
             ep("b", 2, [WRONG], False), ep("b", 3, [("rm /app/run.sh", "$ ")], False),
             ep("b", 4, [WRONG], False)]
    rows, counts = turn_pairs(only_pass + mixed, per_task=4)
    assert {r["task_id"] for r in rows} == {"b"} and len(rows) == 4
    keys = {json.dumps([r["chosen"], r["rejected"]]) for r in rows}
    assert len(keys) == 4  # the duplicate (CHMOD vs WRONG twice) is not taken twice
    assert counts.get("duplicate", 0) >= 1


def test_divergence_needs_a_difference():
    conv = ep("t", 0, [CHMOD], True)["conversation"]
    assert divergent_pair(conv, conv) == (None, "no_divergence")


def test_rft_keeps_verified_passes_that_ended_on_task_complete_distinct_and_capped():
    rows = rft_rows([ep("t", 0, [CHMOD, DONE, CONFIRM], True), ep("t", 1, [CHMOD, DONE, CONFIRM], True),
                     ep("t", 2, [LS, CHMOD, DONE, CONFIRM], True), ep("t", 3, [LS, CHMOD, DONE, CONFIRM], True),
                     ep("u", 0, [CHMOD], True, ended_by="max_turns"), ep("u", 1, [WRONG, DONE, CONFIRM], False)],
                    per_task=2)
    assert [(r["task_id"], r["attempt"]) for r in rows] == [("t", 0), ("t", 2)]  # duplicates and non-passes out
    assert all(r["source"] == "rft" and r["conversations"][-1]["role"] == "assistant" for r in rows)
