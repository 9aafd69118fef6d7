import math

import pytest

from termagent.evaluate.metrics import accuracy_with_stderr, compute_metrics, pass_at_k

PROTOCOL = {"temperature": 0.7, "max_input_tokens": 4096, "max_output_tokens": 512,
            "timeouts": {"agent_sec": 120}, "agent": "terminus-json"}


def trial(task, attempt, reward, *, error=None, turns=None, n_turns=None, tokens=(10, 5)):
    return {
        "task_id": task, "attempt": attempt, "reward": reward,
        "error": {"class": error, "message": "x"} if error else None,
        "turns": turns if turns is not None else [{"parse_ok": True}],
        "n_turns": n_turns if n_turns is not None else len(turns or [1]),
        "tokens": {"in": tokens[0], "out": tokens[1]},
    }


def test_pass_at_k_matches_closed_form():
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    # 1 - C(2,2)/C(4,2) = 1 - 1/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    # n - c < k: every draw of k contains a success
    assert pass_at_k(3, 2, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_accuracy_and_stderr_over_attempts():
    # attempt 0 solves 2/4 tasks, attempt 1 solves 1/4, attempt 2 solves 3/4
    solved = {
        "a": {0: True, 1: False, 2: True},
        "b": {0: True, 1: True, 2: True},
        "c": {0: False, 1: False, 2: True},
        "d": {0: False, 1: False, 2: False},
    }
    acc, se, method = accuracy_with_stderr(solved)
    per_attempt = [0.5, 0.25, 0.75]
    mean = sum(per_attempt) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_attempt) / 2)
    assert acc == pytest.approx(0.5)
    assert se == pytest.approx(sd / math.sqrt(3))
    assert method == "attempts"


def test_single_attempt_falls_back_to_binomial_stderr():
    acc, se, method = accuracy_with_stderr({"a": {0: True}, "b": {0: False}, "c": {0: False}, "d": {0: False}})
    assert acc == 0.25
    assert se == pytest.approx(math.sqrt(0.25 * 0.75 / 4))
    assert method == "binomial_tasks"


def test_compute_metrics_known_answers():
    records = [
        trial("t1", 0, 1.0, turns=[{"parse_ok": True}, {"parse_ok": True}], tokens=(100, 20)),
        trial("t1", 1, 1.0, turns=[{"parse_ok": False}, {"parse_ok": True}, {"parse_ok": True}], tokens=(200, 30)),
        trial("t2", 0, 0.0, error="AgentTimeoutError", turns=[{"parse_ok": False}], tokens=(50, 10)),
        trial("t2", 1, 1.0, turns=[{"parse_ok": True}], tokens=(60, 10)),
        # partial reward (3 of 4 tests) is not solved; a missing reward is not solved either
        trial("t3", 0, 0.75, turns=[{"parse_ok": True}], tokens=(0, 0)),
        trial("t3", 1, None, error="BuildError", turns=[], n_turns=0, tokens=(0, 0)),
    ]
    m = compute_metrics(records, protocol=PROTOCOL, wall_s=12.5, model="base")
    assert m["n_tasks"] == 3 and m["n_attempts"] == 2 and m["n_trials"] == 6
    # attempt 0: t1 only -> 1/3; attempt 1: t1, t2 -> 2/3
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["accuracy_stderr"] == pytest.approx(math.sqrt(((1 / 3 - 0.5) ** 2 + (2 / 3 - 0.5) ** 2) / 1) / math.sqrt(2))
    assert m["per_task"] == {"t1": 1.0, "t2": 0.5, "t3": 0.0}
    # pass@1 = mean(1, .5, 0); pass@2 = mean(1, 1, 0)
    assert m["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(2 / 3)}
    assert m["errors"] == {"AgentTimeoutError": 1, "BuildError": 1}
    # first turns: T, F, F, T, T (the build error never reached a turn)
    assert m["first_turn_valid_json"] == pytest.approx(3 / 5)
    assert m["mean_turns"] == pytest.approx((2 + 3 + 1 + 1 + 1 + 0) / 6)
    assert m["tokens"]["in"] == 410 and m["tokens"]["out"] == 70
    assert m["wall_s"] == 12.5
    assert m["protocol"] == PROTOCOL
    for field in ("n_tasks", "n_attempts", "accuracy", "accuracy_stderr", "pass_at_k", "per_task", "errors",
                  "first_turn_valid_json", "mean_turns", "tokens", "wall_s", "protocol"):
        assert field in m


def test_converted_trials_without_turns_give_null_first_turn_rate():
    m = compute_metrics([{"task_id": "x", "attempt": 0, "reward": 1.0, "turns": [], "n_turns": None}],
                        protocol={}, wall_s=0)
    assert m["first_turn_valid_json"] is None
    assert m["mean_turns"] is None
    assert m["accuracy"] == 1.0


def test_endings_and_agent_timeouts_are_counted_once_per_episode():
    records = [{"task_id": "a", "attempt": 0, "reward": 0.0, "ended_by": "timeout",
                "error": {"class": "AgentTimeoutError"}},  # the runner's error and the agent's ending: one timeout
               {"task_id": "b", "attempt": 0, "reward": 0.0, "ended_by": "stuck"},
               {"task_id": "c", "attempt": 0, "reward": 1.0, "ended_by": "task_complete"},
               {"task_id": "d", "attempt": 0, "reward": None, "error": {"class": "AgentTimeoutError"}}]
    m = compute_metrics(records, protocol={}, wall_s=1.0)
    assert m["agent_timeouts"] == 2
    assert m["ended_by"] == {"stuck": 1, "task_complete": 1, "timeout": 1, "unknown": 1}
