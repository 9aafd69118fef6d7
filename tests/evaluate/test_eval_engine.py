"""The local eval on the OpenVINO engine (eval.policy openvino, the embedded default): the tiny model's real IR
drives TerminusAgent episodes in real containers, two trials at once through the one engine."""

import json
from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent
from termagent.evaluate.trajectories import run_local_eval
from termagent.policy.openvino import EngineConfig, OpenVINOPolicy
from termagent.policy.shared import in_process_policy
from termagent.tasks.load import load_task

TASK = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "count-lines"


@pytest.mark.docker
def test_local_eval_on_the_engine(tmp_path, base_image, docker_client, tiny_model_dir, tiny_openvino_dir):
    from termagent.sandbox import Sandbox, SandboxConfig

    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)
    policy = in_process_policy(tiny_model_dir, None, policy="openvino", engine=EngineConfig(), concurrency=2,
                               batched=True, prefix_cache=16)
    assert isinstance(policy, OpenVINOPolicy) and policy.ir_dir == tiny_openvino_dir
    try:
        agent = TerminusAgent(policy, AgentConfig(max_turns=2, max_output_tokens=24, max_failed_replies=None))
        trajectories, _ = run_local_eval(sandbox, [load_task(TASK)], agent, attempts=2, concurrency=2,
                                         model="tiny", progress=False)
        stats = dict(policy.stats)
    finally:
        policy.close()
    assert sorted(t["attempt"] for t in trajectories) == [0, 1]
    for t in trajectories:  # the random model fails the task; the episode itself ran, graded, not errored
        assert t["reward"] == 0.0 and len(t["turns"]) == 2, json.dumps(t)[:2000]
    assert stats["rows"] == 4 and 0 < stats["completion_tokens"] <= 4 * 24
