"""MT-GRPO: real multi-turn GRPO steps of the tiny model against real containers. The batch that reaches the
loss is captured by a trainer subclass (it records `_compute_loss`'s inputs, then computes the loss as usual)
and checked against the episodes the agent loop recorded: token-in/token-out ids, the environment mask, and
the (B, T) advantages."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from termagent.agent import AgentConfig
from termagent.train.mt_grpo import MTGRPOParams, build_trainer, make_trainer_class, token_advantages

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "count-lines"


def capturing_trainer_class():
    base = make_trainer_class()

    class Capturing(base):
        captured: list[dict]

        def _compute_loss(self, model, inputs):
            self.captured = getattr(self, "captured", [])
            self.captured.append({k: v.detach().clone() if isinstance(v, torch.Tensor) else v
                                  for k, v in inputs.items()})
            return super()._compute_loss(model, inputs)

    return Capturing


def run_one_step(tmp_path, base_image, docker_client, tiny_model_dir, filter_mode: str, micro_batch_size: int = 0,
                 skip_without_signal: bool = False):
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task

    task = load_task(FIXTURE)
    params = MTGRPOParams(max_steps=1, num_generations=2, tasks_per_step=1, max_turns=2, max_turn_tokens=12,
                          max_completion_length=256, concurrency=2, filter_mode=filter_mode,
                          trl={**MTGRPOParams().trl, "learning_rate": 1e-3},
                          use_vllm=False, micro_batch_size=micro_batch_size,
                          # the untrained model's trajectories tie: with the gate on, nothing would reach the loss
                          skip_without_signal=skip_without_signal)
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)
    # no failed-reply limit: the random tiny model's episodes run to the turn cap
    trainer = build_trainer(params, AgentConfig(max_failed_replies=None), sandbox, [task], model_dir=tiny_model_dir,
                            start_adapter=None, work_dir=tmp_path / "work", rollouts_dir=tmp_path / "rollouts",
                            metrics_dir=tmp_path / "metrics", trainer_cls=capturing_trainer_class())
    trainer.before = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if v.requires_grad}
    trainer.train()
    trainer.rows = trainer.rollout_func.last_rows  # what rollout_func returned, in batch order
    return trainer, params


def loss_rows(trainer):
    """Each row of the loss batch, unpadded, matched to its rollout row (TRL shuffles the batch)."""
    [batch] = trainer.captured
    rows = []
    for b in range(batch["completion_ids"].shape[0]):
        prompt = batch["prompt_ids"][b][batch["prompt_mask"][b].bool()].tolist()
        n = int(batch["completion_mask"][b].sum())
        completion = batch["completion_ids"][b][:n].tolist()
        [match] = [i for i, r in enumerate(trainer.rows) if r["completion_ids"] == completion
                   and r["prompt_ids"] == prompt]
        rows.append((b, match, n))
    return batch, rows


def test_a_multi_turn_step_trains_on_the_sampled_ids_with_env_mask_and_turn_advantages(
        tmp_path, base_image, docker_client, tiny_model_dir):
    trainer, params = run_one_step(tmp_path, base_image, docker_client, tiny_model_dir, "zero")
    batch, rows = loss_rows(trainer)
    results = trainer.rollout_func.last_results
    B, T = batch["completion_ids"].shape
    assert B == 2 and batch["advantages"].shape == (B, T) and batch["tool_mask"].shape == (B, T)
    # the untrained model never confirms completion: both hit the 2-turn cap, counted as 0 ("zero" mode)
    assert [r["status"] for r in trainer.rows] == ["max_turns", "max_turns"]

    expected_adv, _ = token_advantages(trainer.rows, [0.0, 0.0], num_generations=2, seq_len=T, params=params)
    for b, i, n in rows:
        row, episode = trainer.rows[i], results[i]["agent_result"]
        turns = [t for t in episode["turns"] if t.get("completion_ids") is not None]
        assert len(turns) == len(row["turn_spans"]) == 2
        completion = batch["completion_ids"][b].tolist()
        mask = batch["tool_mask"][b].tolist()
        # token in / token out: each turn's span holds exactly the ids the model sampled in that turn
        assert episode["turns"][0]["prompt_ids"] == batch["prompt_ids"][b][batch["prompt_mask"][b].bool()].tolist()
        for turn, (start, end) in zip(turns, row["turn_spans"]):
            assert completion[start:end] == turn["completion_ids"]
            assert mask[start:end] == [1] * (end - start)
        # between the turns: the environment's tokens, masked; the trajectory ends on the model's last token
        (s0, e0), (s1, e1) = row["turn_spans"]
        assert s0 == 0 and e0 < s1 and e1 == n
        assert mask[e0:s1] == [0] * (s1 - e0)
        observation = trainer.processing_class.decode(completion[e0:s1])
        assert turns[1]["messages_in"][-1]["content"] in observation
        # the ids the second call continued from are the buffer: prompt + turn 1 + environment
        assert turns[1]["prompt_ids_base"] + len(turns[1]["prompt_ids"]) == len(turns[0]["prompt_ids"]) + s1
        # (B, T) advantages: the mix inside the sampled spans, 0 on environment tokens and padding
        adv = batch["advantages"][b].tolist()
        assert adv == pytest.approx(expected_adv[i], abs=1e-6)
        assert all(a == 0.0 for a, m in zip(adv, mask) if m == 0) and all(a == 0.0 for a in adv[n:])
        assert row["drift"][0] == "first" and row["drift"][1] in ("clean", "drift")
    # The untrained model's trajectories tie (both 0), so the values are 0 here; test_turn_credit.py checks
    # token_advantages on rows whose turns differ.
    assert len(trainer.captured) == 1 and torch.isfinite(batch["advantages"]).all()

    lines = (tmp_path / "rollouts" / "rollouts.jsonl").read_text().splitlines()
    import json

    logged = [json.loads(line) for line in lines]
    assert len(logged) == 2 and all(len(r["turn_info"]) == 2 for r in logged)
    assert all(set(t) >= {"exec_rc", "format_valid", "token_span"} for r in logged for t in r["turn_info"])
    step = json.loads((tmp_path / "rollouts" / "steps.jsonl").read_text().splitlines()[0])
    assert step["filtered_frac"] == 1.0 and step["clean_turns"] + step["drift_turns"] == 2


def test_micro_batches_train_one_rollout_batch_in_one_optimizer_step(tmp_path, base_image, docker_client,
                                                                    tiny_model_dir):
    """micro_batch_size 1: the rollout batch of 2 trajectories is generated once and trained as 2 micro-batches
    of 1 whose gradients accumulate into one optimizer step (the H100 profile's memory plan)."""
    trainer, _ = run_one_step(tmp_path, base_image, docker_client, tiny_model_dir, "zero", micro_batch_size=1)
    assert trainer.rollout_func.calls == 1 and trainer.state.global_step == 1
    assert [b["completion_ids"].shape[0] for b in trainer.captured] == [1, 1]
    seen = sorted(tuple(b["completion_ids"][0][b["completion_mask"][0].bool()].tolist()) for b in trainer.captured)
    assert seen == sorted(tuple(r["completion_ids"]) for r in trainer.rows)
    assert all(b["advantages"].dim() == 2 for b in trainer.captured)


def test_compact_filtering_drops_a_trajectory_that_hits_the_turn_cap(
        tmp_path, base_image, docker_client, tiny_model_dir):
    trainer, params = run_one_step(tmp_path, base_image, docker_client, tiny_model_dir, "exclude")
    batch, rows = loss_rows(trainer)
    for b, i, n in rows:
        row = trainer.rows[i]
        assert row["status"] == "max_turns" and row["outcome"] is None  # out of the group statistics
        assert batch["tool_mask"][b].sum() == 0  # no loss on any of its tokens
        assert torch.count_nonzero(batch["advantages"][b]) == 0
        assert len(row["turn_spans"]) == params.max_turns
    assert trainer.last_mt_stats["filtered_frac"] == 1.0


def test_a_rollout_batch_without_outcome_signal_takes_no_optimizer_step(tmp_path, base_image, docker_client,
                                                                        tiny_model_dir):
    """Every trajectory filtered (turn cap, exclude): no group has an outcome advantage. The signal gate skips the
    loss and the optimizer step: the LoRA weights are bit-identical, the step is counted as skipped."""
    trainer, _ = run_one_step(tmp_path, base_image, docker_client, tiny_model_dir, "exclude", skip_without_signal=True)
    assert trainer.state.global_step == 1 and trainer.gate.skipped == 1
    assert getattr(trainer, "captured", []) == []  # no micro-batch reached the loss
    after = dict(trainer.model.named_parameters())
    assert trainer.before and all(after[k].equal(v) for k, v in trainer.before.items())
    import json

    step = json.loads((tmp_path / "rollouts" / "steps.jsonl").read_text().splitlines()[0])
    assert step["skipped"] is True


def test_vllm_rollouts_are_refused_clearly_without_a_gpu(tmp_path):
    """The H100 setting (use_vllm) on a machine without CUDA: a clear error naming the param, before any load."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs the vLLM path (make gpu-check)")
    with pytest.raises(RuntimeError, match="mt_grpo.use_vllm"):
        build_trainer(MTGRPOParams(use_vllm=True), AgentConfig(), None, [], model_dir=tmp_path, start_adapter=None,
                      work_dir=tmp_path / "work", rollouts_dir=None, metrics_dir=None)
