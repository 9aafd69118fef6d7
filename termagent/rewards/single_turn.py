"""The single-turn GRPO reward (docs/design.md#single-turn-reward): format·[valid JSON] + script·[exit 0] + verifier·outcome.

The default is the outcome alone with a format gate: 1 when the reply is valid Terminus JSON and the task's tests
pass, else 0 (a reply that does not parse runs nothing). Shaped terms (format, script, pytest partial credit) give
a group reward variance that says nothing about solving: scaled by the group's std they become full-size
advantages for writing JSON, which the policy already does. They stay available as weights."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardWeights:
    format: float = 0.0     # the reply is valid Terminus JSON with at least one command
    script: float = 0.0     # the commands ran with exit status 0
    verifier: float = 1.0   # the outcome: 1.0 when the task's tests pass
    partial_credit: bool = False  # a failed verifier earns pytest passed/total instead of 0


def single_turn_reward(format_ok: bool, script_ok: bool, verifier_reward: float,
                       weights: RewardWeights = RewardWeights()) -> float:
    """The weighted sum. `verifier_reward` must already be in [0, 1] (partial credit included).

    An infrastructure failure has no reward at all: callers pass None to the trainer instead of
    calling this, so the completion stays out of its group's statistics.
    """
    if not 0.0 <= verifier_reward <= 1.0:
        raise ValueError(f"verifier_reward must be in [0, 1], got {verifier_reward!r}")
    return (weights.format * float(bool(format_ok)) + weights.script * float(bool(script_ok))
            + weights.verifier * float(verifier_reward))
