"""The synthetic verdicts and the T1/T2 judgements of the reward-following checks, on hand-computed cases."""

from __future__ import annotations

import pytest

from termagent.rewards.synthetic import balanced_threshold, make_verdict
from termagent.train.reward_following import improvement, separation


def test_the_cut_splits_the_first_batch_closest_to_half_and_is_tie_proof():
    assert balanced_threshold([31, 54, 40, 77]) == 47.0
    # five replies share length 20: a cut at the median (20) would leave arm "short" at 0; 21 splits 5 / 3
    assert balanced_threshold([20, 20, 20, 20, 20, 22, 22, 22]) == 21.0
    with pytest.raises(ValueError):
        balanced_threshold([7, 7])


def test_opposite_arms_judge_the_same_batch_complementarily_and_freeze_their_cut():
    short, long = make_verdict("short"), make_verdict("long")
    batch = [31, 54, 40, 77]
    assert short(batch) == [1.0, 0.0, 1.0, 0.0] and long(batch) == [0.0, 1.0, 0.0, 1.0]
    assert short([46, 48]) == [1.0, 0.0] and short.threshold == 47.0  # frozen after the first batch
    with pytest.raises(ValueError):
        make_verdict("medium")


def test_a_batch_of_equal_lengths_earns_nothing_and_leaves_the_cut_unset():
    verdict = make_verdict("short")
    assert verdict([192] * 4) == [0.0] * 4 and verdict.threshold is None
    assert verdict([100, 192, 150, 120]) == [1.0, 0.0, 0.0, 1.0] and verdict.threshold == 135.0


def test_each_task_gets_its_own_cut_from_its_first_batch():
    """Tasks differ in their natural reply length: one shared cut would leave a task whose replies all fall on
    one side without signal in one arm; a cut per task starts every task near one half."""
    long = make_verdict("long")
    assert long([200, 210, 220, 230, 60, 70, 80, 90], keys=["a"] * 4 + ["b"] * 4) == [0, 0, 1, 1, 0, 0, 1, 1]
    assert long.threshold == {"a": 215.0, "b": 75.0}
    assert long([100, 100], keys=["b", "a"]) == [1.0, 0.0]  # frozen: each length judged against its task's cut
    assert long([5, 9], keys=["c", "c"]) == [0.0, 1.0] and long.threshold["c"] == 7.0  # a new task: its own cut
    assert long([3, 3], keys=["d", "d"]) == [0.0, 0.0] and "d" not in long.threshold  # ties: no cut yet
    with pytest.raises(ValueError):
        long([1, 2], keys=["a"])


def test_separation_reads_both_arms_as_their_share_of_short_replies():
    # arm "short" earns its short share; arm "long" earns 1 - its short share
    passed = separation([0.5, 0.8, 0.9, 1.0], [0.5, 0.7, 0.8, 0.9])
    assert passed["arm_a_short_share_last"] == 0.9 and passed["arm_b_short_share_last"] == 0.2
    assert passed["passed"] and passed["direction"]
    noise = separation([0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5])
    assert not noise["passed"] and not noise["direction"]
    wrong_sign = separation([0.5, 0.2, 0.1, 0.1], [0.5, 0.2, 0.1, 0.1])  # each arm driven away from its reward
    assert wrong_sign["arm_a_short_share_last"] < wrong_sign["arm_b_short_share_last"]


def test_improvement_compares_the_last_steps_with_the_first():
    assert improvement([0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 0.75]) == {
        "first": 0.3333, "last": 0.75, "gain": 0.4167, "passed": True,
        "criterion": "pass rate of the last 3 steps - first 3 >= 0.3"}
    assert not improvement([0.5] * 10)["passed"]
