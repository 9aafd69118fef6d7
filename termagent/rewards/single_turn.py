"""The single-turn GRPO reward (docs/design.md#single-turn-reward): 0.05·format + 0.10·script + 0.85·verifier."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardWeights:
    format: float = 0.05    # the reply is valid Terminus JSON with at least one command
    script: float = 0.10    # the commands ran with exit status 0
    verifier: float = 0.85  # 1.0 when the task's tests pass, else pytest passed/total


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
