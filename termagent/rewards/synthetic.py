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
to each task's first batch, both arms start near 0.5 by construction (ties aside) and the same seed gives both arms
the same first batch, hence the same threshold.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


class LengthVerdict:
    """1.0 when a length is below (arm "short") or above (arm "long") the cut, else 0.0.

    One cut per key (the task: `keys` gives each length's), set by the first batch of that key holding two
    different lengths (`balanced_threshold`) and frozen from then on, so every task starts near 0.5 whatever its
    natural reply length (with one global cut, tasks whose replies all fall on one side give their groups no
    signal in one arm: bench-learns' first SmolLM2 run, 2026-12-06). Keys left out (None) share one cut. A key's
    batch of equal lengths before its cut is set earns 0 everywhere (no signal: the signal gate skips the step).
    `threshold` fixes one cut for every key."""

    ARMS = ("short", "long")

    def __init__(self, arm: str, threshold: float | None = None):
        if arm not in self.ARMS:
            raise ValueError(f"length verdict arm must be one of {self.ARMS}, got {arm!r}")
        self.arm = arm
        self.fixed = threshold
        self.thresholds: dict = {}  # key -> its frozen cut
        self.name = arm

    @property
    def threshold(self) -> float | dict | None:
        """The fixed cut, the single shared cut (no keys given), or {key: cut} (None: nothing set yet)."""
        if self.fixed is not None:
            return self.fixed
        if not self.thresholds:
            return None
        if set(self.thresholds) == {None}:
            return self.thresholds[None]
        return {str(k): v for k, v in sorted(self.thresholds.items(), key=lambda kv: str(kv[0]))}

    def __call__(self, lengths: Sequence[float], keys: Sequence | None = None) -> list[float]:
        if not lengths:
            return []
        keys = [None] * len(lengths) if keys is None else list(keys)
        if len(keys) != len(lengths):
            raise ValueError(f"{len(keys)} keys for {len(lengths)} lengths")
        cuts: dict = {}
        for key in dict.fromkeys(keys):
            cut = self.fixed if self.fixed is not None else self.thresholds.get(key)
            if cut is None:
                batch = [n for n, k in zip(lengths, keys) if k == key]
                if len(set(batch)) > 1:  # all equal (e.g. every reply cut at the token limit): no signal yet
                    cut = self.thresholds[key] = balanced_threshold(batch)
            cuts[key] = cut
        rewards = []
        for n, key in zip(lengths, keys):
            cut = cuts[key]
            rewards.append(0.0 if cut is None else float(n < cut if self.arm == "short" else n > cut))
        return rewards


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
