"""Rewards as pure functions: the single-turn GRPO reward and MT-GRPO's turn-level credit.

No I/O, no sandbox, no trainer: each function takes plain numbers and returns plain numbers, so the
formulas of docs/design.md#formulas live in one place and are checked on hand-computed cases.
"""

from termagent.rewards.single_turn import RewardWeights, single_turn_reward
from termagent.rewards.turn_level import (
    compute_turn_advantages,
    compute_turn_rewards,
    map_turn_advantages_to_tokens,
)

__all__ = [
    "RewardWeights",
    "compute_turn_advantages",
    "compute_turn_rewards",
    "map_turn_advantages_to_tokens",
    "single_turn_reward",
]
