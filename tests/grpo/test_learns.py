"""Reward following on the tiny model (the CI-sized T1 of issue 41; scripts/bench_learns.py runs T1/T2 on SmolLM2):
GRPO and MT-GRPO, through the stages' own trainers, from the same warm start and seed under two opposite synthetic
verdicts (replies shorter / longer than the first batch's split point). A trainer that follows its reward raises
each arm's own reward, so the share of short replies ends higher in arm "short" than in arm "long"; one with a
sign error ends the other way round, and noise-only updates leave both arms where they started (0.5). And the signal gate: a batch without outcome signal leaves the adapter
bit-identical (no optimizer step, Adam's moments untouched)."""

from __future__ import annotations

import os

import pytest
from safetensors.torch import load_file

from termagent.agent import AgentConfig
from termagent.rewards.synthetic import LengthVerdict, make_verdict
from termagent.tasks.load import load_task
from termagent.train.grpo import GRPOParams
from termagent.train.mt_grpo import MTGRPOParams
from termagent.train.reward_following import (
    calibrate_mt_task,
    calibrate_mt_verdict,
    pick_by_rate,
    run_grpo,
    run_mt_grpo,
    separation,
    with_cuts,
)
from termagent.train.single_turn import EnvConfig
from tests.grpo.conftest import write_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Sized on the warm tiny model (tests/grpo/conftest.py): its compact replies vary in length at temperature 1, and
# a LoRA at this rate moves their length within a few steps. CI runs seed 0; the direction was checked with seeds
# 0, 1 and 2 (TERMAGENT_LEARNS_SEEDS=0,1,2).
STEPS = 8
# MT-GRPO's 8 trajectories a step carry less signal per step than GRPO's 8 replies (one verdict per trajectory,
# spread over its turns' tokens): at 8 steps CI's machine once ended at a 0.17 margin where this one reached 0.75
# (2026-12-06, seed 0, same code); 12 steps give the slow start room.
MT_STEPS = 12
LAST = 3
MARGIN = 0.2
SEEDS = [int(s) for s in os.environ.get("TERMAGENT_LEARNS_SEEDS", "0").split(",")]


def grpo_config(seed: int, **kw) -> GRPOParams:
    return GRPOParams(**({"use_vllm": False, "num_generations": 4, "per_device_train_batch_size": 4,
                          "gradient_accumulation_steps": 2, "max_steps": STEPS, "max_completion_length": 48,
                          "temperature": 1.0, "max_resamples": 0, "max_prompt_length": 4096, "seed": seed,
                          # every step's reward is the arm's: no task may leave the draw (or end the run) for tying
                          "retire_after_ties": 0,
                          "trl": {**GRPOParams().trl, "learning_rate": 2e-3, "save_steps": 1, "save_total_limit": 10}}
                         | kw))


def assert_apart(arms: dict[str, list[float]]) -> None:
    """Each arm's reward is its own verdict; on the common statistic (the share of short replies, 0.5 in both arms
    at the balanced start) arm "short" must end at least MARGIN above arm "long" (scripts/bench_learns.py asks for
    >= 0.75 against <= 0.25 on SmolLM2). Noise-only updates clear the margin about 1 time in 12 (the last 3 steps'
    24 replies per arm), a sign error never."""
    verdict = separation(arms["short"], arms["long"], last=LAST)
    assert verdict["arm_a_short_share_last"] - verdict["arm_b_short_share_last"] >= MARGIN, (verdict, arms)


@pytest.mark.parametrize("seed", SEEDS)
def test_grpo_follows_a_synthetic_reward_in_both_directions(tmp_path, seed, warm_adapter, tasks, grpo_sandbox):
    arms = {}
    for arm in ("short", "long"):
        run = run_grpo(grpo_config(seed), tmp_path / arm, warmup=warm_adapter, tasks=tasks, sandbox=grpo_sandbox,
                       env_config=EnvConfig(), verdict=make_verdict(arm))
        arms[arm] = run["per_step"]["reward"]
        assert run["steps"] == STEPS
    print("grpo arms:", arms)  # pytest -s
    assert_apart(arms)


def mt_params(seed: int, **kw) -> MTGRPOParams:
    return MTGRPOParams(**({"max_steps": MT_STEPS, "num_generations": 4, "tasks_per_step": 2, "max_turns": 2,
                            "max_turn_tokens": 48, "max_completion_length": 256, "concurrency": 4,
                            "temperature": 1.0, "use_vllm": False, "micro_batch_size": 0, "seed": seed,
                            "max_prompt_length": 4096, "trl": {**MTGRPOParams().trl, "learning_rate": 2e-3}} | kw))


@pytest.mark.parametrize("seed", SEEDS)
def test_mt_grpo_follows_a_synthetic_reward_in_both_directions(tmp_path, seed, warm_model_dir, warm_adapter, tasks,
                                                               grpo_sandbox):
    arms = {}
    for arm in ("short", "long"):
        run = run_mt_grpo(mt_params(seed), AgentConfig(max_failed_replies=None), grpo_sandbox, tasks, tmp_path / arm,
                          model_dir=warm_model_dir, start_adapter=warm_adapter, verdict=make_verdict(arm))
        arms[arm] = run["per_step"]["reward"]
        assert run["steps"] == MT_STEPS
    print("mt_grpo arms:", arms)
    assert_apart(arms)


def test_calibration_cuts_every_task_on_the_start_policy_and_the_arm_keeps_those_cuts(tmp_path, warm_model_dir,
                                                                                        warm_adapter, tasks,
                                                                                        grpo_sandbox):
    """T1-MT's cuts come from the start policy for every task, not from whatever policy first meets a task: with one
    task per step and one step, an uncalibrated verdict would cut only the task that step drew."""
    params = mt_params(0, max_steps=1, tasks_per_step=1, micro_batch_size=0)
    cuts = make_verdict("short")
    calibration = calibrate_mt_verdict(params, AgentConfig(max_failed_replies=None), grpo_sandbox, tasks, cuts,
                                       model_dir=warm_model_dir, start_adapter=warm_adapter, work=tmp_path / "cal")
    assert calibration["episodes"] == len(tasks) * params.num_generations
    assert calibration["tasks_cut"] == len(tasks) and set(cuts.threshold) == {t.id for t in tasks}
    arm = with_cuts(make_verdict("long"), cuts)
    run = run_mt_grpo(params, AgentConfig(max_failed_replies=None), grpo_sandbox, tasks, tmp_path / "long",
                      model_dir=warm_model_dir, start_adapter=warm_adapter, verdict=arm)
    assert run["steps"] == 1
    assert run["threshold"] == cuts.threshold  # the step judged on the calibrated cuts, and set none of its own
    assert len(run["per_step"]["reward"]) == 1


def test_t2_mt_measures_each_candidate_on_the_start_policy_by_its_own_verifier(tmp_path, warm_model_dir,
                                                                             warm_adapter, base_image, grpo_sandbox):
    """T2-MT's task is chosen by the candidates' rates on the start policy, each episode graded by its task's verifier:
    a task whose verifier always passes and one whose verifier never does read all and none of their graded episodes
    (whatever the model typed), and neither is inside (0.2, 0.6), so no task is chosen."""
    always = load_task(write_task(tmp_path / "tasks", "always", base_image.tag,
                                  test_sh="#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"))
    never = load_task(write_task(tmp_path / "tasks", "never", base_image.tag,
                                 test_sh="#!/bin/bash\nmkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"))
    params = mt_params(0, max_steps=1, tasks_per_step=1, micro_batch_size=0)
    cal = calibrate_mt_task(params, AgentConfig(max_failed_replies=None), grpo_sandbox, [always, never], episodes=2,
                            model_dir=warm_model_dir, start_adapter=warm_adapter, work=tmp_path / "cal")
    assert cal["episodes"] == 4
    always_rate, never_rate = cal["rates"]["always"], cal["rates"]["never"]
    assert always_rate["n"] + always_rate["infra_failures"] == 2 and never_rate["n"] + never_rate["infra_failures"] == 2
    assert always_rate["n"] >= 1 and never_rate["n"] >= 1  # an infrastructure failure is not graded, never a 0
    assert always_rate["passes"] == always_rate["n"] and never_rate["passes"] == 0
    assert cal["task"] is None
    # the pick: strictly inside (0.2, 0.6), nearest 0.4, ties by id; a task with no graded episode is never picked
    rates = {"a": {"passes": 1, "n": 2}, "b": {"passes": 3, "n": 8}, "c": {"passes": 1, "n": 4},
             "d": {"passes": 0, "n": 0}, "e": {"passes": 3, "n": 8}}
    assert pick_by_rate(rates) == "b"
    assert pick_by_rate({"c": rates["c"], "d": rates["d"]}) == "c"
    assert pick_by_rate({"x": {"passes": 5, "n": 8}, "y": {"passes": 1, "n": 8}, "z": {"passes": 3, "n": 5}}) is None


class ThenNothing(LengthVerdict):
    """Balanced on the first batch, then every reply fails: step 0 trains, step 1 has no signal."""

    def __call__(self, lengths, keys=None):
        first = not self.thresholds
        rewards = super().__call__(lengths, keys)
        return rewards if first else [0.0] * len(lengths)


def test_a_batch_without_signal_leaves_the_adapter_bit_identical(tmp_path, warm_adapter, tasks, grpo_sandbox):
    """Step 0 trains (Adam's moments fill), step 1's batch ties everywhere: the gate drops its gradients, so the
    momentum of step 0 cannot carry the adapter on; the checkpoint after step 2 equals the one after step 1."""
    run = run_grpo(grpo_config(0, max_steps=2), tmp_path, warmup=warm_adapter, tasks=tasks, sandbox=grpo_sandbox,
                   env_config=EnvConfig(), verdict=ThenNothing("short"))
    assert run["skipped_steps"] == 1 and run["steps"] == 2
    ckpt = tmp_path / "checkpoints"
    start = load_file(str(warm_adapter / "adapter_model.safetensors"))
    after_1 = load_file(str(ckpt / "checkpoint-1" / "adapter_model.safetensors"))
    after_2 = load_file(str(ckpt / "checkpoint-2" / "adapter_model.safetensors"))
    assert any(not after_1[k].equal(start[k]) for k in start), "step 0 had signal and should have trained"
    assert all(after_2[k].equal(after_1[k]) for k in after_1), "a step without signal moved the adapter"
