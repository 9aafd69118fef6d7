"""An episode of the tiny model behind a real `transformers serve` on 127.0.0.1, driven through the
`openai` policy: the same loop as the in-process policy, over HTTP, with the server's token counts
recorded and equal to the policy's own tokenizer's."""

from __future__ import annotations

from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent, expand_turns

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURE = Path(__file__).parent / "fixtures" / "count-lines"


def test_openai_episode_against_transformers_serve(base_image, docker_client, tiny_model_dir, tmp_path):
    from termagent.policy import make_policy
    from termagent.sandbox import Sandbox, SandboxConfig, run_trial
    from termagent.serve import serving
    from termagent.tasks.load import load_task

    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    with serving(tiny_model_dir, log_path=tmp_path / "serve.log") as url:
        assert url.startswith("http://127.0.0.1:")
        policy = make_policy(f"openai:{url}", tokenizer=str(tiny_model_dir))
        config = AgentConfig(max_turns=2, max_output_tokens=16, temperature=1.0, max_failed_replies=None)
        result = run_trial(sandbox, load_task(FIXTURE), TerminusAgent(policy, config))
    episode = result.agent_result
    assert result.error is None and result.reward == 0.0
    assert episode["error"] is None and episode["ended_by"] == "max_turns" and episode["n_turns"] == 2
    turns = expand_turns(episode)
    for turn in turns:
        # usage reported by the server == the policy's own count of what it sent
        assert turn["prompt_tokens"] == policy.count_tokens(turn["messages_in"]) > 0
        assert 0 <= turn["completion_tokens"] <= 16 and turn["finish_reason"] in ("stop", "length")
    assert episode["tokens"]["out"] > 0
    assert episode["tokens"] == {"in": sum(t["prompt_tokens"] for t in turns),
                                 "out": sum(t["completion_tokens"] for t in turns)}
