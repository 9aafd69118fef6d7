"""MT-GRPO's pieces without a container: token advantages of a group, trajectory status, the token buffer."""

from __future__ import annotations

import pytest

from termagent.policy import make_policy
from termagent.rewards import compute_turn_advantages, compute_turn_rewards
from termagent.train.mt_grpo import (
    MTGRPOParams,
    TurnCreditParams,
    rollout_row,
    token_advantages,
    trajectory_status,
)
from termagent.train.tito import ChatSuffix, TokenBufferPolicy


def row(outcome, exec_ok, format_ok, spans):
    return {"outcome": outcome, "turn_exec_ok": exec_ok, "turn_format_ok": format_ok, "turn_spans": spans}


def test_token_advantages_mix_centred_outcome_and_turn_advantages_inside_spans_only():
    params = MTGRPOParams(max_turns=4)
    rows = [row(1.0, [True, True], [True, True], [[0, 2], [4, 6]]),
            row(0.0, [False, True, True], [True, False, True], [[0, 1], [3, 4], [6, 8]]),
            row(None, [True], [True], [[0, 3]]),  # excluded: no reward, no advantage
            row(0.5, [True], [True], [[0, 2]])]  # a group of its own with one scored row: turn advantage 0
    outcome_adv = [0.5, -0.5, 0.0, 0.0]  # TRL's: R - group mean (scale_rewards none)
    out, turn_advs = token_advantages(rows, outcome_adv, num_generations=2, seq_len=9, params=params)
    # hand computation: turn rewards, then r - mean per turn position (no std: scale_rewards none)
    r0 = compute_turn_rewards(1.0, [True, True], [True, True], max_turns=4)
    r1 = compute_turn_rewards(0.0, [False, True, True], [True, False, True], max_turns=4)
    mean0, mean1 = (r0[0] + r1[0]) / 2, (r0[1] + r1[1]) / 2
    assert turn_advs[0] == pytest.approx([r0[0] - mean0, r0[1] - mean1])
    assert turn_advs[1] == pytest.approx([r1[0] - mean0, r1[1] - mean1, 0.0])  # turn 3 reached by one row only
    a = 0.5
    expected0 = [0.5 * 0.5 + a * turn_advs[0][0]] * 2 + [0.0] * 2 + [0.5 * 0.5 + a * turn_advs[0][1]] * 2 + [0.0] * 3
    assert out[0] == pytest.approx(expected0)
    assert out[1][1:3] == [0.0, 0.0] and out[1][4:6] == [0.0, 0.0] and out[1][8] == 0.0
    assert out[1][6] == pytest.approx(-0.25)  # α·0 + (1-α)·(-0.5)
    assert out[2] == [0.0] * 9 and turn_advs[2] is None
    assert out[3][:2] == [0.0, 0.0] and turn_advs[3] == [0.0]
    # per turn position the (scored) turn advantages are centred
    assert turn_advs[0][0] + turn_advs[1][0] == pytest.approx(0.0)


def test_alpha_zero_gives_the_outcome_advantage_and_group_scaling_uses_the_std():
    rows = [row(1.0, [True], [True], [[0, 1]]), row(0.0, [False], [False], [[0, 1]])]
    out, _ = token_advantages(rows, [0.5, -0.5], num_generations=2, seq_len=2,
                              params=MTGRPOParams(credit=TurnCreditParams(alpha=0.0)))
    assert out == [[0.5, 0.0], [-0.5, 0.0]]
    _, scaled = token_advantages(rows, [0.5, -0.5], num_generations=2, seq_len=2,
                                 params=MTGRPOParams(scale_rewards="group"))
    assert scaled[0][0] == pytest.approx(1.0, abs=1e-5) and scaled[1][0] == pytest.approx(-1.0, abs=1e-5)
    assert compute_turn_advantages([[1.0], [0.0]], scale=False) == [[0.5], [-0.5]]


@pytest.mark.parametrize("trial, status", [
    ({"reward": 1.0, "agent_result": {"ended_by": "task_complete"}}, "kept"),
    ({"reward": 0.0, "agent_result": {"ended_by": "max_turns"}}, "max_turns"),
    # the model gave up (replies in a row that ran nothing): its own failure, kept in the loss
    ({"reward": 0.0, "agent_result": {"ended_by": "failed_replies"}}, "kept"),
    ({"reward": 0.0, "agent_result": {"ended_by": "context_limit"}}, "context_limit"),
    ({"reward": 0.0, "agent_result": {"ended_by": "timeout"}}, "timeout"),
    ({"reward": 0.0, "error": {"class": "AgentTimeoutError"}, "agent_result": None}, "timeout"),
    ({"reward": None, "error": {"class": "SandboxError"}, "agent_result": None}, "infra"),
    ({"reward": 0.0, "agent_result": {"ended_by": "error"}}, "infra"),
])
def test_trajectory_status(trial, status):
    assert trajectory_status(trial) == status


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return make_policy(f"hf:{tiny_model_dir}")


def test_the_token_buffer_continues_its_own_ids_and_counts_drift(hf):
    suffix = ChatSuffix.from_tokenizer(hf.tokenizer)
    assert suffix.close_assistant == "<|im_end|>\n" and suffix.before_observation == "<|im_start|>user\n"
    assert suffix.after_observation.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    buffer = TokenBufferPolicy(base=hf, suffix=suffix, eos_ids=hf.eos_ids, max_completion_tokens=400)
    first = [{"role": "user", "content": "Count the lines of /app/notes.txt."}]
    [g1] = buffer.generate([first], max_tokens=10, temperature=1.0, seed=3)
    assert buffer.prompt_ids == hf.prompt_ids(first) and buffer.completion_ids == g1.completion_ids
    assert buffer.context_limit == len(buffer.prompt_ids) + 400
    second = [*first, {"role": "assistant", "content": g1.text}, {"role": "user", "content": "New Terminal Output:\n$ "}]
    counted = buffer.count_tokens(second)
    [g2] = buffer.generate([second], max_tokens=10, temperature=1.0, seed=4)
    (s0, e0), (s1, e1) = [t.span for t in buffer.turns]
    assert g2.prompt_ids == buffer.prompt_ids + buffer.completion_ids[:s1] and counted == len(g2.prompt_ids)
    assert buffer.completion_ids[s0:e0] == g1.completion_ids and buffer.completion_ids[s1:e1] == g2.completion_ids
    assert buffer.env_mask == [1] * e0 + [0] * (s1 - e0) + [1] * (e1 - s1)
    assert len(buffer.logprobs) == e1 and buffer.logprobs[s1:e1] == g2.logprobs
    env_text = hf.tokenizer.decode(buffer.completion_ids[e0:s1])
    ended = g1.completion_ids[-1] in hf.eos_ids
    assert env_text == ("" if ended else "<|im_end|>") + "\n<|im_start|>user\nNew Terminal Output:\n$ <|im_end|>\n" \
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    # drift: the message rendering re-tokenises the decoded reply; the counter says whether that matches
    rendered = hf.prompt_ids(second)
    assert buffer.turns[1].drift == ("clean" if rendered == g2.prompt_ids else "drift")
    assert sum(buffer.drift_counts.values()) == 1
    # a conversation that does not extend the buffer (a summary, a dropped turn) is refused
    with pytest.raises(Exception, match="no longer extends"):
        buffer.generate([[first[0], {"role": "user", "content": "x"}]], max_tokens=4, temperature=1.0)


def test_a_trajectory_with_no_generation_becomes_a_masked_placeholder(hf):
    buffer = TokenBufferPolicy(base=hf, suffix=ChatSuffix.from_tokenizer(hf.tokenizer), eos_ids=hf.eos_ids,
                               max_completion_tokens=100)
    trial = {"task_id": "t", "reward": None, "error": {"class": "SandboxError"}, "agent_result": None}
    out = rollout_row(trial, buffer, filter_mode="zero", fallback_prompt_ids=[5, 6], eos_id=hf.eos_ids[0])
    assert out["status"] == "infra" and out["outcome"] is None  # infrastructure: excluded in every mode
    assert out["prompt_ids"] == [5, 6] and out["env_mask"] == [0] and out["turn_spans"] == []


def two_turn_buffer(hf) -> tuple[TokenBufferPolicy, list[dict]]:
    """A token buffer that generated an episode's first two turns; and the episode's opening conversation."""
    buffer = TokenBufferPolicy(base=hf, suffix=ChatSuffix.from_tokenizer(hf.tokenizer), eos_ids=hf.eos_ids,
                               max_completion_tokens=200)
    first = [{"role": "user", "content": "Make /app/run.sh executable."}]
    [g1] = buffer.generate([first], max_tokens=6, temperature=1.0, seed=1)
    second = [*first, {"role": "assistant", "content": g1.text}, {"role": "user", "content": "New Terminal Output:\n$ "}]
    buffer.generate([second], max_tokens=6, temperature=1.0, seed=2)
    return buffer, first


def test_a_timed_out_trajectory_without_a_record_scores_zero_at_every_turn_in_zero_mode(hf):
    """The runner abandons an agent thread caught in a model call at the agent timeout: the trial has no episode
    record, but the token buffer holds the turns. filter_mode "zero" trains on it as a failure, turn by turn
    (run 12's first try crashed here: 0 turn advantages for 5 spans); "exclude" leaves it out."""
    buffer, _ = two_turn_buffer(hf)
    trial = {"task_id": "t", "reward": 0.0, "error": {"class": "AgentTimeoutError"}, "agent_result": None}
    zero = rollout_row(trial, buffer, filter_mode="zero", fallback_prompt_ids=[5], eos_id=hf.eos_ids[0])
    assert zero["status"] == "timeout" and zero["outcome"] == 0.0 and len(zero["turn_spans"]) == 2
    assert zero["turn_exec_ok"] == [False, False] and zero["turn_format_ok"] == [False, False]
    assert any(zero["env_mask"])  # trained on
    passed = {**zero, "outcome": 1.0, "turn_exec_ok": [True], "turn_format_ok": [True], "turn_spans": [[0, 2]]}
    _, turn_advs = token_advantages([passed, zero], [0.5, -0.5], num_generations=2, seq_len=len(zero["env_mask"]),
                                      params=MTGRPOParams(max_turns=4))
    assert len(turn_advs[1]) == 2 and turn_advs[1][0] < 0 < turn_advs[0][0]
    excluded = rollout_row(trial, buffer, filter_mode="exclude", fallback_prompt_ids=[5], eos_id=hf.eos_ids[0])
    assert excluded["outcome"] is None and not any(excluded["env_mask"])


def test_a_retried_infrastructure_failure_whose_record_lost_the_buffers_turns_is_excluded(hf):
    """T1-MT on SmolLM2 crashed here: a tmux capture failed (infrastructure), run_trials retried the trial with the
    same agent, the retry refused the already-begun buffer (PolicyError), and the record (0 turns) no longer
    matched the buffer's 1 span: rollout_row raised and ended the run. The row is an excluded infra row."""
    buffer = TokenBufferPolicy(base=hf, suffix=ChatSuffix.from_tokenizer(hf.tokenizer), eos_ids=hf.eos_ids,
                               max_completion_tokens=100)
    buffer.generate([[{"role": "user", "content": "Make /app/run.sh executable."}]], max_tokens=6, temperature=1.0,
                    seed=1)
    trial = {"task_id": "t", "reward": None, "error": {"class": "PolicyError"},
             "agent_result": {"task_id": "t", "ended_by": "error", "turns": []}}
    for mode in ("exclude", "zero"):
        out = rollout_row(trial, buffer, filter_mode=mode, fallback_prompt_ids=[5], eos_id=hf.eos_ids[0])
        assert out["status"] == "infra" and out["outcome"] is None and not any(out["env_mask"]), mode
        assert out["turn_exec_ok"] == [False] and out["turn_format_ok"] == [False], mode


def test_a_retried_trial_restarts_the_buffer_from_its_opening_conversation(hf):
    """run_trials reruns an infrastructure failure with the same agent: the retry sends the episode's first
    conversation again. The buffer drops the abandoned attempt (it refused it before: PolicyError, a second infra
    failure) and holds the retry's tokens only, so its spans match the retry's record."""
    buffer, first = two_turn_buffer(hf)
    assert len(buffer.turns) == 2
    assert buffer.count_tokens(first) == len(hf.prompt_ids(first))  # the retry's first context check
    [retry] = buffer.generate([first], max_tokens=6, temperature=1.0, seed=3)
    assert len(buffer.turns) == 1 and buffer.turns[0].drift == "first"
    assert buffer.prompt_ids == list(hf.prompt_ids(first)) and buffer.completion_ids == list(retry.completion_ids)
    assert buffer.env_mask == [1] * len(retry.completion_ids) and len(buffer.logprobs) == len(retry.completion_ids)
