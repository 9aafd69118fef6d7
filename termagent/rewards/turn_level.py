"""MT-GRPO turn-level credit (docs/design.md#turn-level-credit): turn rewards, per-position advantages, token mapping.

turn reward   r(t) = w_o·R·γ^(T−1−t) + w_e·1[rc_t = 0] + w_f·1[valid_t] + w_eff·(max_turns − T)/(max_turns − 1)·1[R > 0]
turn adv.     A(i, t) = (r(i, t) − mean_g r(·, t)) / (std_g r(·, t) + ε)  over the trajectories that reached t
token adv.    (1 − α)·A_outcome + α·A(t) inside turn t's span, 0 elsewhere (prompt, environment tokens)
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def compute_turn_rewards(outcome: float, exec_ok: Sequence[bool], format_ok: Sequence[bool], *,
                         max_turns: int, gamma: float = 0.95, w_outcome: float = 0.7, w_exec: float = 0.15,
                         w_format: float = 0.15, w_efficiency: float = 0.05) -> list[float]:
    """One reward per turn of one trajectory of T = len(exec_ok) turns."""
    if len(exec_ok) != len(format_ok):
        raise ValueError(f"exec_ok has {len(exec_ok)} turns, format_ok {len(format_ok)}")
    n = len(exec_ok)
    if n == 0:
        return []
    if max_turns < n:
        raise ValueError(f"trajectory has {n} turns, more than max_turns={max_turns}")
    efficiency = 0.0
    if outcome > 0 and max_turns > 1:
        efficiency = w_efficiency * (max_turns - n) / (max_turns - 1)
    return [w_outcome * outcome * gamma ** (n - 1 - t) + w_exec * float(bool(exec_ok[t]))
            + w_format * float(bool(format_ok[t])) + efficiency for t in range(n)]


def compute_turn_advantages(group_turn_rewards: Sequence[Sequence[float]], eps: float = 1e-6, *,
                            scale: bool = True) -> list[list[float]]:
    """Normalise per turn position over the trajectories of one prompt group that reached it.

    Population std; a position reached by a single trajectory gets 0 (nothing to compare with).
    scale=False only centres (r - mean), as Dr.GRPO does with the outcome (`scale_rewards: none`), so that
    the outcome and turn advantages MT-GRPO mixes with α are in the same units.
    """
    longest = max((len(r) for r in group_turn_rewards), default=0)
    stats: list[tuple[float, float] | None] = []
    for t in range(longest):
        column = [r[t] for r in group_turn_rewards if len(r) > t]
        if len(column) < 2:
            stats.append(None)
            continue
        mean = sum(column) / len(column)
        std = math.sqrt(sum((x - mean) ** 2 for x in column) / len(column))
        stats.append((mean, std))
    def advantage(t: int, x: float) -> float:
        if stats[t] is None:
            return 0.0
        mean, std = stats[t]
        return (x - mean) / (std + eps) if scale else x - mean

    return [[advantage(t, x) for t, x in enumerate(r)] for r in group_turn_rewards]


def map_turn_advantages_to_tokens(turn_advantages: Sequence[float], outcome_advantage: float,
                                  turn_spans: Sequence[tuple[int, int]], seq_len: int,
                                  alpha: float = 0.5) -> list[float]:
    """Per-token advantages of one sequence: turn t's span [start, end) gets the mix, the rest 0."""
    if len(turn_advantages) != len(turn_spans):
        raise ValueError(f"{len(turn_advantages)} turn advantages for {len(turn_spans)} spans")
    out = [0.0] * seq_len
    for adv, (start, end) in zip(turn_advantages, turn_spans):
        if not 0 <= start <= end <= seq_len:
            raise ValueError(f"span [{start}, {end}) outside a sequence of {seq_len} tokens")
        value = (1.0 - alpha) * outcome_advantage + alpha * adv
        for i in range(start, end):
            out[i] = value
    return out
