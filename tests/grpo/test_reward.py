"""The single-turn reward on known replies, in real containers with the real tmux terminal and verifier:
valid JSON + passing commands = 1.0; invalid JSON = 0 (nothing runs); failing tests = pytest partial
credit; an infrastructure failure (a verifier that writes no reward) is None from every reward function
— left out of the group — never 0."""

from __future__ import annotations

import math

import pytest

from termagent.rewards import RewardWeights, single_turn_reward
from termagent.train.single_turn import EnvConfig, SingleTurnEnv, group_stats, rollout_records, verifier_score
from tests.grpo.conftest import NO_REWARD_SH, reply, write_task

pytestmark = pytest.mark.docker


SHAPED = RewardWeights(format=0.05, script=0.10, verifier=0.85, partial_credit=True)  # the shaped reward, a param


@pytest.fixture(scope="module")
def env(grpo_sandbox, tasks):
    env = SingleTurnEnv(grpo_sandbox, tasks, EnvConfig(weights=SHAPED))
    env.probe_screens(progress=False)
    yield env
    env.close()


def test_prompt_is_the_eval_loops_first_message(env, tasks, grpo_sandbox):
    """The GRPO prompt is exactly what TerminusAgent sends on its first turn in a fresh container."""
    from termagent.agent import AgentConfig, TerminusAgent
    from termagent.policy.base import Generation, Policy
    from termagent.train.single_turn import run_trial

    class Recorder(Policy):  # a real Policy: answers with a valid final reply and records what it was sent
        name = "recorder"

        def __init__(self):
            self.seen = []

        def generate(self, messages_batch, **kw):
            self.seen += messages_batch
            text = reply("echo hello > /tmp/out.txt\n")
            return [Generation(text=text, finish_reason="stop", prompt_tokens=1, completion_tokens=1)]

        def count_tokens(self, messages):
            return sum(len(m["content"]) for m in messages) // 4

    recorder = Recorder()
    task = tasks[0]
    run_trial(grpo_sandbox, task, TerminusAgent(recorder, AgentConfig(max_turns=1)), attempt=99)
    assert recorder.seen[0] == env.prompt(task.id)
    assert [m["role"] for m in env.prompt(task.id)] == ["user"]
    assert task.instruction.strip() in env.prompt(task.id)[0]["content"]


def test_harbor_protocol_prompt_is_the_eval_loops_and_its_replies_score(harbor_wheel, tasks, grpo_sandbox):
    """agent.protocol harbor-terminus-2: the GRPO prompt is terminus-2's first message (Harbor's template,
    Harbor's screen capture), the same the agent loop sends, and replies are judged by Harbor's parser."""
    from termagent.agent import AgentConfig, TerminusAgent
    from termagent.policy.base import Generation
    from termagent.train.single_turn import EnvConfig, run_trial

    class Recorder:
        name = "recorder"

        def __init__(self):
            self.seen = []

        def generate(self, messages_batch, **kw):
            self.seen += messages_batch
            return [Generation(text=reply("true\n"), finish_reason="stop", prompt_tokens=1, completion_tokens=1)]

        def count_tokens(self, messages):
            return sum(len(m["content"]) for m in messages) // 4

    harbor = {"protocol": "harbor-terminus-2", "harbor_package": str(harbor_wheel)}
    env = SingleTurnEnv(grpo_sandbox, tasks[:1], EnvConfig(**harbor))
    try:
        env.probe_screens(progress=False)
        recorder = Recorder()
        run_trial(grpo_sandbox, tasks[0], TerminusAgent(recorder, AgentConfig(max_turns=1, **harbor)), attempt=98)
        assert recorder.seen[0] == env.prompt(tasks[0].id)
        assert recorder.seen[0][0]["content"].startswith(env.protocol.texts.initial_prompt.split("{")[0])
        solved, no_duration, broken = env.score([tasks[0].id] * 3, [
            reply("echo hello > /tmp/out.txt\n"),
            '{"analysis": "", "plan": "", "commands": [{"keystrokes": "echo hello > /tmp/out.txt\\n"}]}',
            '{"analysis": "x", "plan": "y", "commands": []'])
        assert solved.reward == pytest.approx(1.0) and no_duration.reward == pytest.approx(1.0)
        # Harbor's parser closes the missing brace (an auto-correction): strict format runs nothing
        assert env.protocol.parse('{"analysis": "x", "plan": "y", "commands": []').fixes
        assert not broken.parse_ok and broken.reward == 0.0
    finally:
        env.close()


def test_known_replies(env, tasks):
    hello = tasks[0].id
    assert "hello" in hello
    replies = [
        reply("echo hello > /tmp/out.txt\n"),           # solves it
        '{"analysis": "x", "plan": "y", "commands": [',  # invalid JSON: runs nothing
        reply("echo nope > /tmp/out.txt\n"),             # file exists, wrong content: 1 of 2 tests
        reply("ls /no/such/dir\n"),                     # command fails, no file: 0 of 2 tests
    ]
    env.prepare([hello] * 4)
    outcomes = env.score([hello] * 4, replies)
    solved, invalid, partial, failed = outcomes

    assert (solved.format_ok, solved.script_ok, solved.verifier_reward) == (True, True, 1.0)
    assert solved.reward == pytest.approx(1.0)
    assert solved.passed == 2 and solved.total == 2 and not solved.screen_drift

    assert not invalid.parse_ok and not invalid.executed
    assert invalid.reward == 0.0

    assert partial.executed and partial.script_ok and (partial.passed, partial.total) == (1, 2)
    assert partial.verifier_reward == pytest.approx(0.5)
    assert partial.reward == pytest.approx(0.05 + 0.10 + 0.85 * 0.5)

    assert failed.exec_rc not in (None, 0) and not failed.script_ok
    assert failed.verifier_reward == 0.0 and failed.reward == pytest.approx(0.05)

    # The three reward functions TRL calls, weighted as TRL weighs them, give single_turn_reward.
    funcs, weights = env.reward_functions(), env.reward_weights()
    columns = [f(prompts=None, completions=[[{"role": "assistant", "content": r}] for r in replies],
                 task_id=[hello] * 4) for f in funcs]
    for i, outcome in enumerate(outcomes):
        assert sum(w * col[i] for w, col in zip(weights, columns)) == pytest.approx(outcome.reward)


def test_cut_off_reply_runs_nothing(env, tasks):
    """A reply without EOS (cut at max_completion_length) is not run, as the eval loop would not run it."""
    eos = 7
    env.eos_token_ids = {eos}
    try:
        env.prepare([tasks[0].id] * 2)
        cut, whole = env.score([tasks[0].id] * 2, [reply("echo hello > /tmp/out.txt\n")] * 2,
                               completion_ids=[[1, 2, 3], [1, 2, eos]])
    finally:
        env.eos_token_ids = set()
    assert cut.truncated and not cut.executed and cut.reward == 0.0
    assert whole.executed and whole.reward == pytest.approx(1.0)


def test_infrastructure_failure_is_excluded_not_zero(grpo_sandbox, tmp_path, base_image, tasks):
    from termagent.tasks.load import load_task

    broken = load_task(write_task(tmp_path, "broken-verifier", base_image.tag, test_sh=NO_REWARD_SH))
    env = SingleTurnEnv(grpo_sandbox, [broken, tasks[0]])
    env.probe_screens(progress=False)
    ids = [broken.id, tasks[0].id]
    good = reply("echo hello > /tmp/out.txt\n")
    env.prepare(ids)
    outcomes = env.score(ids, [good, good])
    assert outcomes[0].reward is None and outcomes[0].infra_failure
    assert outcomes[0].error and outcomes[0].error["class"] == "VerifierError"
    assert outcomes[1].reward == pytest.approx(1.0)
    for func in env.reward_functions():
        values = func(prompts=None, completions=[good, good], task_id=ids)
        assert values[0] is None and values[1] is not None
    # Left out of the group statistics: a group [None, 1.0, 0.0, 1.0] has the std of [1, 0, 1].
    stds, _ = group_stats([None, 1.0, 0.0, 1.0], 4)
    assert stds[0] == pytest.approx(0.57735, rel=1e-4)
    records, _ = rollout_records(outcomes, [env.prompt(i) for i in ids], training_step=0, group_size=2,
                                 generate_s=0.0)
    assert records[0]["reward"] is None and records[0]["infra_failure"] is True


def test_pure_parts():
    assert verifier_score(1.0, 3, 4) == 1.0  # the verifier's pass wins over a partial pytest count
    assert verifier_score(0.0, 3, 4) == 0.75
    assert verifier_score(0.0, None, None) == 0.0
    stds, frac = group_stats([0.0, 0.0, 1.0, 0.0, None, None, 0.5, 0.5], 4)
    assert stds[:4] == [0.5] * 4 and stds[4:] == [0.0] * 4 and frac == 0.5
    assert single_turn_reward(True, True, 1.0, RewardWeights()) == pytest.approx(1.0)
    assert math.isclose(single_turn_reward(True, False, 0.0, SHAPED), 0.05)
    assert single_turn_reward(True, True, 0.0) == 0.0  # the default: the outcome alone
    assert verifier_score(0.0, 3, 4, partial_credit=False) == 0.0
