"""An episode of the in-process tiny model (hf policy) on a real container: the loop records token ids
and counts that agree with the policy's own tokenizer. The untrained model writes no valid JSON, so the
episode runs to the turn cap with parse errors, which is the point: nothing breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent, expand_turns

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).parent / "fixtures" / "count-lines"


def test_tiny_model_episode_records_token_ids(base_image, docker_client, tiny_model_dir):
    from termagent.policy import make_policy
    from termagent.sandbox import Sandbox, SandboxConfig, run_trial
    from termagent.tasks.load import load_task

    policy = make_policy(f"hf:{tiny_model_dir}")
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    config = AgentConfig(max_turns=2, max_output_tokens=16, temperature=1.0, seed=0, max_failed_replies=None)
    result = run_trial(sandbox, load_task(FIXTURE), TerminusAgent(policy, config))
    episode = result.agent_result
    assert result.error is None and result.reward == 0.0
    assert episode["ended_by"] == "max_turns" and episode["n_turns"] == 2 and episode["model"] == policy.name
    for turn in expand_turns(episode):
        assert turn["prompt_tokens"] == policy.count_tokens(turn["messages_in"]) == len(turn["prompt_ids"])
        assert 0 < len(turn["completion_ids"]) <= 16 and turn["finish_reason"] in ("stop", "length")
        assert turn["observation"]  # a parse error or cut-off note: the next message is never empty
    assert episode["tokens"]["in"] == sum(t["prompt_tokens"] for t in episode["turns"])
    # Stored as deltas: the second turn's prompt ids extend the first turn's prompt + completion.
    second = episode["turns"][1]
    assert second["prompt_ids_base"] >= len(episode["turns"][0]["prompt_ids"]) > 0
    assert len(second["prompt_ids"]) < second["prompt_tokens"]
