"""MT-GRPO with its rollouts on the OpenVINO engine (engine.rl): a real multi-turn step against a real container,
the engine holding the trainer's live LoRA, each turn generated per call through TRLvLLMPolicy over the engine, and
the trained tokens exactly the ones the engine sampled (token-in/token-out), with TRL's importance-sampling metrics."""

from __future__ import annotations

import pytest

from termagent.agent import AgentConfig
from termagent.policy.openvino import EngineConfig
from termagent.train.engine_rollouts import engine_for
from termagent.train.mt_grpo import MTGRPOParams, build_trainer
from tests.train.test_mt_grpo import FIXTURE, capturing_trainer_class

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_a_multi_turn_step_on_the_engine_trains_on_its_sampled_ids(tmp_path, base_image, docker_client,
                                                                   tiny_model_dir, tiny_openvino_dir):
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task

    params = MTGRPOParams(max_steps=1, num_generations=2, tasks_per_step=1, max_turns=2, max_turn_tokens=12,
                          max_completion_length=256, concurrency=2, filter_mode="zero", use_vllm=False,
                          skip_without_signal=False,  # the loss runs even when both trajectories score alike
                          trl={**MTGRPOParams().trl, "learning_rate": 1e-3})
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)
    trainer = build_trainer(params, AgentConfig(max_failed_replies=None), sandbox, [load_task(FIXTURE)],
                            model_dir=tiny_model_dir, start_adapter=None, work_dir=tmp_path / "work",
                            rollouts_dir=tmp_path / "rollouts", metrics_dir=tmp_path / "metrics",
                            trainer_cls=capturing_trainer_class())
    engine = engine_for(trainer, EngineConfig(rl=True, precision="f32"), tiny_model_dir)
    try:
        trainer.train()
        stats = dict(engine.stats)
    finally:
        engine.close()
    assert stats["adapter_updates"] == 1 and stats["completion_tokens"] > 0  # the engine generated, with the LoRA
    trainer.rows = trainer.rollout_func.last_rows
    results = trainer.rollout_func.last_results
    checked = 0
    for batch in trainer.captured:  # every loss batch's rows, matched to the rollout rows they came from
        for b in range(batch["completion_ids"].shape[0]):
            n = int(batch["completion_mask"][b].sum())
            completion = batch["completion_ids"][b][:n].tolist()
            [i] = [i for i, r in enumerate(trainer.rows) if r["completion_ids"] == completion]
            turns = [t for t in results[i]["agent_result"]["turns"] if t.get("completion_ids") is not None]
            for turn, (start, end) in zip(turns, trainer.rows[i]["turn_spans"]):
                assert completion[start:end] == turn["completion_ids"]  # trained = sampled by the engine
                checked += 1
    assert checked >= 2
    # the engine's logprobs at the trainer's temperature (logits-scaled IR) are scored for every sampled token
    assert all(lp is not None for row in trainer.rows for lp, m in zip(row["logprobs"], row["env_mask"]) if m)
    logged = [h for h in trainer.state.log_history if "sampling/sampling_logp_difference/mean" in h]
    assert logged and logged[0]["sampling/sampling_logp_difference/mean"] < 0.05
