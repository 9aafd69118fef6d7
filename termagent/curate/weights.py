"""Per-task rollout statistics and the curation weight (docs/design.md#curation):

    w = Normal(mean turns; mu=5, sigma=2) x Normal(mean reward; mu=0.4, sigma=0.25) x (reward_std + 0.05)

Tasks a policy solves about 40% of the time, in about five turns, with outcomes that vary are the
ones RL learns most from; the +0.05 keeps a zero-variance task possible, just unlikely.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from termagent.rollouts import ReadStats, iter_rollouts, n_turns


@dataclass
class TaskStats:
    n: int = 0
    mean_turns: float = 0.0
    mean_reward: float = 0.0
    _m2: float = 0.0  # Welford's sum of squared deviations of reward

    def add(self, reward: float, turns: int) -> None:
        self.n += 1
        self.mean_turns += (turns - self.mean_turns) / self.n
        delta = reward - self.mean_reward
        self.mean_reward += delta / self.n
        self._m2 += delta * (reward - self.mean_reward)

    @property
    def reward_std(self) -> float:
        """Population std of the task's rewards (0 for a single rollout)."""
        return math.sqrt(self._m2 / self.n) if self.n else 0.0

    @classmethod
    def from_rate(cls, n: int, passes: int, mean_turns: float) -> TaskStats:
        """A measured solve rate (passes of n episodes, rewards 0/1) as reward statistics."""
        rate = passes / n if n else 0.0
        return cls(n=n, mean_turns=mean_turns, mean_reward=rate, _m2=n * rate * (1 - rate))

    def to_dict(self) -> dict:
        return {"n": self.n, "mean_turns": self.mean_turns, "mean_reward": self.mean_reward,
                "reward_std": self.reward_std}


def rate_stats(rates: dict[str, dict]) -> dict[str, TaskStats]:
    """Per-task statistics from a sample stage's solve rates (termagent.train.sampling): the weight then reads
    the pass rate, not a shaped reward."""
    return {tid: TaskStats.from_rate(r["n"], r["passes"], r.get("mean_turns") or 0.0)
            for tid, r in rates.items() if r["n"]}


def task_stats(rollouts: str | Path, read_stats: ReadStats | None = None) -> dict[str, TaskStats]:
    """Stream rollouts.jsonl into per-task statistics (turns: len(turn_info), 1 for single-turn rows)."""
    out: dict[str, TaskStats] = {}
    for r in iter_rollouts(rollouts, read_stats):
        out.setdefault(r["task_id"], TaskStats()).add(r["reward"], n_turns(r))
    return out


@dataclass
class WeightConfig:
    turns_mu: float = 5.0
    turns_sigma: float = 2.0
    reward_mu: float = 0.5  # a solve rate near one half: the most groups with a pass and a fail
    reward_sigma: float = 0.3
    std_floor: float = 0.05  # added to reward_std


def normal_pdf(x: float, mu: float, sigma: float) -> float:
    return math.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))


def curation_weight(stats: TaskStats, cfg: WeightConfig | None = None) -> float:
    cfg = cfg or WeightConfig()
    return (normal_pdf(stats.mean_turns, cfg.turns_mu, cfg.turns_sigma)
            * normal_pdf(stats.mean_reward, cfg.reward_mu, cfg.reward_sigma)
            * (stats.reward_std + cfg.std_floor))


def weighted_sample(weights: dict[str, float], k: int, seed: int) -> list[str]:
    """k ids drawn without replacement, each draw proportional to weight (Efraimidis-Spirakis:
    key = u^(1/w), take the k largest). Ids are visited in sorted order, so the draw depends only on
    the seed and the weights. Zero-weight ids come last, in id order."""
    rng = random.Random(seed)
    keyed = []
    for tid in sorted(weights):
        u = rng.random()
        w = weights[tid]
        key = math.log(u) / w if w > 0 and u > 0 else -math.inf
        keyed.append((key, tid))
    keyed.sort(key=lambda kt: (-kt[0], kt[1]))
    return [tid for _, tid in keyed[:k]]


def weights_for(stats: dict[str, TaskStats], ids: Iterable[str], cfg: WeightConfig | None = None) -> dict[str, float]:
    return {tid: curation_weight(stats[tid], cfg) for tid in ids if tid in stats}
