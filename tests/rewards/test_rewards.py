"""The reward formulas on hand-computed cases and properties."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from termagent.rewards import (
    RewardWeights,
    compute_turn_advantages,
    compute_turn_rewards,
    map_turn_advantages_to_tokens,
    single_turn_reward,
)


def test_single_turn_reward_weights():
    assert single_turn_reward(True, True, 1.0) == pytest.approx(1.0)
    assert single_turn_reward(False, False, 0.0) == 0.0
    assert single_turn_reward(True, False, 0.5) == pytest.approx(0.5)  # by default the outcome alone
    assert single_turn_reward(True, True, 0.0) == 0.0  # valid JSON that ran cleanly but failed the tests earns 0
    shaped = RewardWeights(0.05, 0.10, 0.85)
    assert single_turn_reward(True, False, 0.5, shaped) == pytest.approx(0.05 + 0.425)
    assert single_turn_reward(True, True, 0.0, RewardWeights(0.2, 0.3, 0.5)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="verifier_reward"):
        single_turn_reward(True, True, 1.5)


def test_turn_rewards_hand_computed():
    r = compute_turn_rewards(1.0, [True, False, True], [True, True, False], max_turns=5)
    eff = 0.05 * (5 - 3) / 4
    assert r == pytest.approx([0.7 * 0.95**2 + 0.15 + 0.15 + eff, 0.7 * 0.95 + 0.15 + eff, 0.7 + 0.15 + eff])
    # failed outcome: no outcome term, no efficiency bonus
    assert compute_turn_rewards(0.0, [True], [False], max_turns=5) == pytest.approx([0.15])
    assert compute_turn_rewards(0.0, [], [], max_turns=5) == []
    with pytest.raises(ValueError):
        compute_turn_rewards(1.0, [True], [True, True], max_turns=5)


def test_turn_advantages_hand_computed():
    adv = compute_turn_advantages([[1.0, 2.0], [3.0], [2.0, 4.0, 9.0]], eps=0.0)
    # position 0: mean 2, population std sqrt(2/3); position 1: mean 3, std 1; position 2: one trajectory -> 0
    s0 = math.sqrt(2 / 3)
    assert adv[0] == pytest.approx([-1 / s0, -1.0])
    assert adv[1] == pytest.approx([1 / s0])
    assert adv[2] == pytest.approx([0.0, 1.0, 0.0])


@given(st.lists(st.lists(st.floats(-10, 10), min_size=1, max_size=6), min_size=2, max_size=8))
def test_turn_advantages_zero_mean_per_position(group):
    adv = compute_turn_advantages(group)
    assert [len(a) for a in adv] == [len(r) for r in group]
    for t in range(max(len(r) for r in group)):
        column = [a[t] for a in adv if len(a) > t]
        assert sum(column) == pytest.approx(0.0, abs=1e-6)


def test_token_mapping():
    tok = map_turn_advantages_to_tokens([1.0, -1.0], 0.5, [(2, 4), (6, 7)], 8, alpha=0.5)
    assert tok == pytest.approx([0, 0, 0.75, 0.75, 0, 0, -0.25, 0])
    # alpha = 0: plain outcome advantage inside spans
    assert map_turn_advantages_to_tokens([3.0], 0.4, [(0, 2)], 3, alpha=0.0) == pytest.approx([0.4, 0.4, 0.0])
    with pytest.raises(ValueError):
        map_turn_advantages_to_tokens([1.0], 0.0, [(2, 9)], 8)
