"""Eval metrics from trial records: the `metrics/eval/<model>.json` schema
(docs/design.md#eval-metrics).

A trial record is the dict one task × attempt produced (our runner's trajectory, or a Harbor/TB1
trial converted by harbor.py / tb1.py):

    {"task_id": str, "attempt": int, "reward": float | None, "error": {"class", "message"} | None,
     "n_turns": int | None, "tokens": {"in": int, "out": int} | None,
     "turns": [{"parse_ok": bool, ...}, ...] | None}

A trial counts as solved when its reward is >= SOLVED_REWARD (Harbor/TB2 rewards are 0 or 1; our
partial pytest rewards count only when every test passed). A missing reward (infrastructure error)
counts as unsolved: it is reported under `errors`, never silently dropped from the denominator.

Formulas (k attempts per task, n tasks):
  accuracy         = mean over attempts a of acc_a, acc_a = mean over tasks of solved[t, a]
                     (equals the mean over all trials when every task has every attempt).
  accuracy_stderr  = sample std of (acc_1..acc_k) / sqrt(k) — the spread between repeated runs of
                     the whole benchmark, the number "7.87% vs 10.11%" needs. With k == 1 there is
                     no spread between runs: we fall back to the binomial sqrt(p(1-p)/n) over
                     tasks and say so in `accuracy_stderr_method`.
  pass_at_k[k]     = mean over tasks of 1 - C(n_t - c_t, k) / C(n_t, k) (Chen et al. 2021, unbiased),
                     n_t attempts of task t, c_t solved; k = 1..min_t n_t.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SOLVED_REWARD = 1.0 - 1e-9


def details_path(metrics_path: Path) -> Path:
    """metrics/eval/<model>.json -> metrics/eval/<model>.details.json (termagent.evaluate.outputs writes both)."""
    metrics_path = Path(metrics_path)
    return metrics_path.with_name(f"{metrics_path.stem}.details.json")


def is_solved(reward: float | None) -> bool:
    return reward is not None and reward >= SOLVED_REWARD


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: probability that at least one of k attempts drawn without
    replacement from n (c of them correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def accuracy_with_stderr(solved: dict[str, dict[int, bool]]) -> tuple[float, float, str]:
    """(accuracy, stderr, method) from solved[task_id][attempt]; see the module docstring."""
    by_attempt: dict[int, list[bool]] = defaultdict(list)
    for attempts in solved.values():
        for attempt, ok in attempts.items():
            by_attempt[attempt].append(ok)
    if not by_attempt:
        return 0.0, 0.0, "none"
    per_attempt = [sum(v) / len(v) for _, v in sorted(by_attempt.items())]
    accuracy = sum(per_attempt) / len(per_attempt)
    if len(per_attempt) >= 2:
        k = len(per_attempt)
        var = sum((a - accuracy) ** 2 for a in per_attempt) / (k - 1)
        return accuracy, math.sqrt(var / k), "attempts"
    n = len(by_attempt[next(iter(by_attempt))])
    return accuracy, math.sqrt(accuracy * (1 - accuracy) / n), "binomial_tasks"


def error_class(record: dict) -> str | None:
    error = record.get("error")
    if not error:
        return None
    if isinstance(error, dict):
        return str(error.get("class") or "UnknownError")
    return str(error)


def compute_metrics(
    records: Iterable[dict], *, protocol: dict[str, Any], wall_s: float, model: str | None = None
) -> dict[str, Any]:
    """The metrics dict for one model's eval; `protocol` is copied verbatim (temperature,
    max_input_tokens, max_output_tokens, timeouts, agent)."""
    records = list(records)
    solved: dict[str, dict[int, bool]] = defaultdict(dict)
    for r in records:
        solved[r["task_id"]][int(r.get("attempt", 0))] = is_solved(r.get("reward"))

    accuracy, stderr, method = accuracy_with_stderr(solved)
    min_attempts = min((len(a) for a in solved.values()), default=0)
    pass_k = {
        str(k): sum(pass_at_k(len(a), sum(a.values()), k) for a in solved.values()) / len(solved)
        for k in range(1, min_attempts + 1)
    }

    errors = Counter(c for c in (error_class(r) for r in records) if c)
    # how each episode ended (task_complete, max_turns, failed_replies, stuck, timeout, error): the agent timeouts
    # and stuck episodes of an eval are counted here, not only in its trajectories
    endings = Counter(str(r.get("ended_by") or "unknown") for r in records)

    # First-turn JSON validity: over trials whose first turn reached the model (converted Harbor
    # trials carry no turns: the field is then null, not a made-up number).
    first_turns = [r["turns"][0] for r in records if r.get("turns")]
    first_valid = (
        sum(bool(t.get("parse_ok")) for t in first_turns) / len(first_turns) if first_turns else None
    )
    turn_counts = [r["n_turns"] for r in records if r.get("n_turns") is not None]
    tokens_in = sum(int((r.get("tokens") or {}).get("in") or 0) for r in records)
    tokens_out = sum(int((r.get("tokens") or {}).get("out") or 0) for r in records)
    rewards = [float(r["reward"]) for r in records if r.get("reward") is not None]
    summaries = [r.get("summarizations") or 0 for r in records]
    n_summaries = sum(len(s) if isinstance(s, list) else int(s) for s in summaries)

    return {
        "model": model,
        "n_tasks": len(solved),
        "n_attempts": max((len(a) for a in solved.values()), default=0),
        "n_trials": len(records),
        "accuracy": accuracy,
        "accuracy_stderr": stderr,
        "accuracy_stderr_method": method,
        "mean_reward": sum(rewards) / len(records) if records else 0.0,
        "pass_at_k": pass_k,
        "per_task": {t: sum(a.values()) / len(a) for t, a in sorted(solved.items())},
        "errors": dict(sorted(errors.items())),
        "retried": sum(bool(r.get("retried_errors")) for r in records),  # run again after an ungraded failure
        "ended_by": dict(sorted(endings.items())),
        "agent_timeouts": sum(r.get("ended_by") == "timeout" or error_class(r) == "AgentTimeoutError" for r in records),
        "first_turn_valid_json": first_valid,
        "mean_turns": sum(turn_counts) / len(turn_counts) if turn_counts else None,
        "tokens": {
            "in": tokens_in,
            "out": tokens_out,
            "in_per_trial": tokens_in / len(records) if records else 0.0,
            "out_per_trial": tokens_out / len(records) if records else 0.0,
        },
        "summarizations": n_summaries,
        "wall_s": round(float(wall_s), 3),
        "protocol": dict(protocol),
    }
