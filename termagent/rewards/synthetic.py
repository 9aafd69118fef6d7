"""Synthetic verifiable rewards: the hook that proves the RL code follows its reward (issue 41, item 1).

A *verdict* replaces the task's tests as what a rollout is scored on. It judges the tokens the policy sampled,
so it is verifiable without a container and can be set in opposite directions: two runs from the same start
with opposite arms must drift apart if, and only if, the trainer's gradient follows its reward (a sign error
would make them drift the wrong way; noise-only updates would leave both near their start).

    verdict = make_verdict("short")              # 1 when a reply is shorter than the threshold, else 0
    verdict([31, 54, 40, 77])                    # threshold None: set between the two middle lengths (47) and frozen
    -> [1.0, 0.0, 1.0, 0.0]

The single-turn GRPO environment judges each reply's completion tokens; MT-GRPO judges each trajectory's mean
tokens per model turn (`train_grpo(..., verdict=)`, `build_trainer(..., verdict=)`). With the threshold left
to the first batch, both arms start near 0.5 by construction (ties aside) and the same seed gives both arms
the same first batch, hence the same threshold.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


class LengthVerdict:
    """1.0 when a length is below (arm "short") or above (arm "long") `threshold`, else 0.0. With `threshold`
    None the first batch judged that holds two different lengths sets it (`balanced_threshold`), frozen from then
    on; a batch of equal lengths before that earns 0 everywhere (no signal: the signal gate skips its step)."""

    ARMS = ("short", "long")

    def __init__(self, arm: str, threshold: float | None = None):
        if arm not in self.ARMS:
            raise ValueError(f"length verdict arm must be one of {self.ARMS}, got {arm!r}")
        self.arm = arm
        self.threshold = threshold
        self.name = arm

    def __call__(self, lengths: Sequence[float]) -> list[float]:
        if not lengths:
            return []
        if self.threshold is None:
            if len(set(lengths)) == 1:  # nothing to split (e.g. every reply cut at the token limit): no signal yet
                return [0.0] * len(lengths)
            self.threshold = balanced_threshold(lengths)
        if self.arm == "short":
            return [float(n < self.threshold) for n in lengths]
        return [float(n > self.threshold) for n in lengths]


def balanced_threshold(lengths: Sequence[float]) -> float:
    """The cut between two adjacent observed values that splits `lengths` closest to half below, half above
    (the median, made tie-proof: replies of a small model often share a length, and a cut at a shared value
    would leave an arm at 0). Needs two different values."""
    values = sorted(set(lengths))
    if len(values) < 2:
        raise ValueError(f"no cut splits lengths that are all equal ({values})")
    cuts = [(lo + hi) / 2 for lo, hi in itertools.pairwise(values)]
    return min(cuts, key=lambda t: abs(sum(n < t for n in lengths) / len(lengths) - 0.5))


# name -> factory; every verdict takes a batch of per-rollout lengths (tokens) and returns rewards in [0, 1]
VERDICTS = {"short": lambda threshold=None: LengthVerdict("short", threshold),
            "long": lambda threshold=None: LengthVerdict("long", threshold)}


def make_verdict(name: str, threshold: float | None = None) -> LengthVerdict:
    if name not in VERDICTS:
        raise ValueError(f"unknown verdict {name!r}; known: {sorted(VERDICTS)}")
    return VERDICTS[name](threshold)
