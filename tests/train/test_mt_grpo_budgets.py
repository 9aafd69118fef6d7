"""MT-GRPO's budgets are checked together when params load (issue 35, defect 6): turns x turn tokens (+ the
least each observation adds) against the trajectory budget, refusing with the key names; observations at
agent.max_observation_bytes warn; every task's first prompt (the agent's real rendering through the model's
chat template) against max_prompt_length."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from termagent.agent.config import AgentConfig
from termagent.params import read_sections
from termagent.train.mt_grpo import (
    MTGRPOParams,
    check_first_prompts,
    trajectory_budget_warning,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_old_h100_budgets_are_refused_naming_the_keys():
    with pytest.raises(ValueError) as info:
        MTGRPOParams(max_turns=16, max_turn_tokens=1024, max_completion_length=8192, use_vllm=False)
    message = str(info.value)
    for key in ("mt_grpo.max_turns", "mt_grpo.max_turn_tokens", "mt_grpo.max_completion_length"):
        assert key in message, message
    assert "<= 7" in message  # what fits at 1,024 tokens a turn


def test_every_profile_loads_with_consistent_budgets():
    for profile in (None, "h100", "smoke"):
        p = read_sections(REPO / "params.yaml", profile, mt_grpo=MTGRPOParams, agent=AgentConfig)
        assert p.mt_grpo.max_turns * p.mt_grpo.max_turn_tokens < p.mt_grpo.max_completion_length, profile


def test_full_observations_warn_but_do_not_refuse():
    params = MTGRPOParams(max_turns=6, max_turn_tokens=192, max_completion_length=4096, use_vllm=False)
    warning = trajectory_budget_warning(params, AgentConfig(max_observation_bytes=10000))
    assert warning and "agent.max_observation_bytes" in warning and "context_limit" in warning
    assert trajectory_budget_warning(params, AgentConfig(max_observation_bytes=400)) is None


def test_first_prompt_longer_than_max_prompt_length_is_refused(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from termagent.tasks.load import load_task

    task = load_task(REPO / "tests" / "agent" / "fixtures" / "count-lines")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    agent = AgentConfig()
    longest = check_first_prompts(MTGRPOParams(use_vllm=False), agent, [task], tokenizer)
    assert 50 < longest < 2048
    with pytest.raises(ValueError, match=rf"mt_grpo.max_prompt_length \(64\).*count-lines \({longest}\)"):
        check_first_prompts(MTGRPOParams(use_vllm=False, max_prompt_length=64, max_turn_tokens=8, max_turns=2),
                            agent, [task], tokenizer)


def test_params_yaml_values_unchanged_for_the_embedded_run():
    mt = yaml.safe_load((REPO / "params.yaml").read_text())["mt_grpo"]
    assert (mt["max_turns"], mt["max_turn_tokens"], mt["max_completion_length"]) == (6, 192, 4096)
