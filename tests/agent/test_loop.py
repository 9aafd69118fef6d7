"""The Terminus episode loop on a real container with real tmux: a scripted policy (a small in-file object
implementing the Policy contract) replays replies; the sandbox, terminal and verifier are real."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent, expand_turns, final_conversation
from termagent.policy import ContextLengthExceeded, Generation
from termagent.protocol import SUMMARY_REQUEST, render_system_prompt

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).parent / "fixtures" / "count-lines"


def reply(keystrokes: list[str] | None = None, done: bool = False, duration: float = 5.0) -> str:
    return json.dumps({"analysis": "looking", "plan": "next step",
                       "commands": [{"keystrokes": k, "duration": duration} for k in keystrokes or []],
                       "task_complete": done})


SOLVE = reply(["wc -l < /app/notes.txt > /app/count.txt\n", "cat /app/count.txt\n"])
DONE = reply([], done=True)


class ScriptedPolicy:
    """Replies from a script, in order. Its tokenizer is 4 characters a token (its own, exact for it);
    with `context_limit` set it refuses prompts that do not fit, as a server does. A summary request is
    answered with a fixed summary without consuming the script."""

    name = "scripted"

    def __init__(self, script: list, context_limit: int | None = None, enforce_limit: int | None = None):
        self.script = list(script)
        self.context_limit = context_limit
        self.enforce_limit = enforce_limit or context_limit
        self.calls: list[list[dict]] = []

    def count_tokens(self, messages: list[dict]) -> int:
        return math.ceil(sum(len(m["content"]) for m in messages) / 4)

    def generate(self, messages_batch, *, max_tokens, temperature, seed=None, top_p=1.0):
        messages = messages_batch[0]
        self.calls.append(messages)
        n = self.count_tokens(messages)
        if self.enforce_limit is not None and n + max_tokens > self.enforce_limit:
            raise ContextLengthExceeded(f"maximum context length is {self.enforce_limit} tokens, "
                                        f"you asked for {n + max_tokens}", limit=self.enforce_limit)
        if messages[-1]["content"].endswith(SUMMARY_REQUEST):
            return [Generation("SUMMARY: counted nothing yet; next: wc -l", "stop", n, 10)]
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        text, finish = item if isinstance(item, tuple) else (item, "stop")
        return [Generation(text, finish, n, math.ceil(len(text) / 4))]


@pytest.fixture(scope="module")
def sandbox(base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig

    return Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)


@pytest.fixture(scope="module")
def task():
    from termagent.tasks.load import load_task

    return load_task(FIXTURE)


def run_episode(sandbox, task, policy, **config):
    from termagent.sandbox import run_trial

    # the loop's own limits, not the embedded profile's (8 turns, 2 failed replies)
    config = {"max_turns": 30, "max_failed_replies": None, **config}
    result = run_trial(sandbox, task, TerminusAgent(policy, AgentConfig(**config)))
    assert result.error is None, result.error
    return result, result.agent_result


def test_scripted_episode_recovers_from_a_parse_error_and_confirms(sandbox, task):
    policy = ScriptedPolicy(["Sure, I will count the lines with wc.", SOLVE, DONE, DONE])
    result, episode = run_episode(sandbox, task, policy)
    assert result.reward == 1.0
    assert episode["ended_by"] == "task_complete" and episode["n_turns"] == 4 and episode["error"] is None
    bad, solve, ask, confirm = expand_turns(episode)
    assert not bad["parse_ok"] and bad["errors"] and bad["keystrokes"] == []
    assert "none of its commands were run" in solve["messages_in"][-1]["content"]
    assert solve["parse_ok"] and solve["rc"] == 0 and "\n3\n" in solve["observation"]
    assert solve["keystrokes"][0]["keystrokes"].startswith("wc -l")
    assert ask["task_complete"] and "Are you sure you want to mark the task complete?" in ask["observation"]
    assert confirm["task_complete"] and confirm["observation"] is None
    first = expand_turns(episode)[0]["messages_in"]
    assert len(first) == 1 and first[0]["content"].startswith(render_system_prompt())
    assert task.instruction.strip() in first[0]["content"]
    assert episode["tokens"]["in"] > 0 and episode["tokens"]["out"] > 0
    assert all(t["t_end"] >= t["t_start"] for t in expand_turns(episode))
    json.dumps(episode)  # the record is plain JSON
    chat = final_conversation(episode)
    assert chat[-1] == {"role": "assistant", "content": DONE} and len(chat) == 8


def test_contexts_are_stored_as_deltas_and_expand_to_what_the_policy_saw(sandbox, task):
    policy = ScriptedPolicy([reply(["echo 1\n"]), reply(["echo 2\n"]), SOLVE, DONE, DONE])
    result, episode = run_episode(sandbox, task, policy)
    assert result.reward == 1.0
    stored = episode["turns"]
    assert stored[0]["messages_in_base"] == 0 and len(stored[0]["messages_in"]) == 1
    for turn in stored[1:]:  # each turn adds the model's reply and one new observation
        assert turn["messages_in_base"] >= 2 and len(turn["messages_in"]) == 1
    assert [t["messages_in"] for t in expand_turns(episode)] == policy.calls
    loaded = json.loads(json.dumps(episode))  # expansion works on the record as written to disk
    assert [t["messages_in"] for t in expand_turns(loaded)] == policy.calls


def test_a_reply_in_between_resets_the_confirmation(sandbox, task):
    policy = ScriptedPolicy([DONE, reply(["echo still-working\n"]), SOLVE, DONE, DONE])
    result, episode = run_episode(sandbox, task, policy)
    assert result.reward == 1.0 and episode["ended_by"] == "task_complete" and episode["n_turns"] == 5


def test_output_length_stop_runs_nothing_and_is_recorded(sandbox, task):
    cut = SOLVE[: len(SOLVE) // 2]
    policy = ScriptedPolicy([(cut, "length"), SOLVE, DONE, DONE])
    result, episode = run_episode(sandbox, task, policy, max_output_tokens=64)
    assert result.reward == 1.0
    first, second = expand_turns(episode)[:2]
    assert first["finish_reason"] == "length" and not first["parse_ok"] and first["keystrokes"] == []
    assert "cut off at 64 tokens" in second["messages_in"][-1]["content"]
    assert second["messages_in"][-2] == {"role": "assistant", "content": cut}


def test_max_turns_ends_the_episode(sandbox, task):
    policy = ScriptedPolicy([reply(["echo 1\n"]), reply(["echo 2\n"])])
    result, episode = run_episode(sandbox, task, policy, max_turns=2)
    assert episode["ended_by"] == "max_turns" and episode["n_turns"] == 2 and result.reward == 0.0


def _chatter(n: int) -> list[str]:
    return [reply([f"seq 1 {300 + i}\n"]) for i in range(n)]  # ~1100 characters (~290 tokens) per turn


@pytest.mark.parametrize("strategy", ["summarize", "drop_oldest"])
def test_small_context_is_reduced_and_the_episode_goes_on(sandbox, task, strategy):
    # The task prompt is ~580 tokens of this policy's tokenizer; two turns of output overflow 1200.
    policy = ScriptedPolicy([*_chatter(4), SOLVE, DONE, DONE], context_limit=1200)
    result, episode = run_episode(sandbox, task, policy, max_output_tokens=100, context_strategy=strategy)
    assert result.reward == 1.0 and episode["ended_by"] == "task_complete"
    events = episode["summarizations"]
    assert events and all(e["strategy"] == strategy and e["trigger"] == "proactive" for e in events)
    assert all(e["tokens_after"] < e["tokens_before"] for e in events)
    for turn in expand_turns(episode):  # every call fitted: the policy would have refused it otherwise
        assert policy.count_tokens(turn["messages_in"]) + 100 <= 1200
        assert turn["messages_in"][0]["content"].startswith(render_system_prompt())  # the task stays
    after = expand_turns(episode)[events[0]["turn"]]["messages_in"]
    if strategy == "summarize":
        assert len(after) == 1 and "SUMMARY: counted nothing yet" in after[0]["content"]
        assert any(m[-1]["content"].endswith(SUMMARY_REQUEST) for m in policy.calls)
    else:
        assert events[0]["dropped_pairs"] >= 1 and len(after) % 2 == 1
        roles = [m["role"] for m in after]
        assert roles == ["user", "assistant"] * (len(after) // 2) + ["user"]


@pytest.mark.parametrize("strategy", ["summarize", "drop_oldest"])
def test_context_length_error_from_the_backend_is_handled(sandbox, task, strategy):
    # The agent does not know the limit; the "server" refuses and states it: nothing runs, the model is
    # told, the context is reduced, the episode continues.
    policy = ScriptedPolicy([*_chatter(4), SOLVE, DONE, DONE], enforce_limit=1200)
    result, episode = run_episode(sandbox, task, policy, max_output_tokens=100, context_strategy=strategy)
    assert result.reward == 1.0 and episode["ended_by"] == "task_complete"
    refused = [t for t in expand_turns(episode) if t["finish_reason"] == "context_length"]
    assert refused and refused[0]["keystrokes"] == [] and "context length exceeded" in refused[0]["errors"][0]
    following = expand_turns(episode)[refused[0]["index"] + 1]["messages_in"][-1]["content"]
    assert "exceeded the context window (1200 tokens)" in following
    assert episode["summarizations"][0]["trigger"] == "context_exceeded"


def test_failed_replies_in_a_row_end_the_episode_and_the_container_is_still_graded(sandbox, task):
    # Solved first, then three replies that run nothing (two parse errors and one cut off): the episode ends
    # there, without the turns left, and the verifier grades what the container holds (solved: reward 1).
    script = [SOLVE, "no json here", "{\"analysis\": ", (SOLVE[:20], "length"), DONE, DONE]
    policy = ScriptedPolicy(script)
    result, episode = run_episode(sandbox, task, policy, max_failed_replies=3, max_turns=8)
    assert episode["ended_by"] == "failed_replies" and episode["n_turns"] == 4
    assert policy.script == [DONE, DONE]  # nothing was asked after the third failed reply
    assert expand_turns(episode)[-1]["observation"] is None
    assert result.reward == 1.0


def test_a_usable_reply_resets_the_failed_reply_count(sandbox, task):
    script = ["no json", "still none", SOLVE, "no json", "none again", DONE, DONE]
    result, episode = run_episode(sandbox, task, ScriptedPolicy(script), max_failed_replies=3)
    assert episode["ended_by"] == "task_complete" and episode["n_turns"] == 7 and result.reward == 1.0
    with pytest.raises(ValueError, match="max_failed_replies"):
        AgentConfig(max_failed_replies=0)


# -- stuck episodes and the agent timeout ----------------------------------------------------------------


def test_the_same_keystrokes_again_and_again_end_the_episode_as_stuck(sandbox, task):
    same = reply(["ls /app\n"], duration=0.2)
    policy = ScriptedPolicy([same] * 6)
    result, episode = run_episode(sandbox, task, policy, max_turns=6, max_repeats=3, max_blocked_turns=None)
    assert episode["ended_by"] == "stuck" and episode["n_turns"] == 3 and len(policy.script) == 3
    assert "the same keystrokes 3 replies in a row" in episode["turns"][-1]["stuck"]
    assert result.reward == 0.0  # the container is still verified: stuck is the model's failure, graded


def test_a_terminal_that_stays_busy_ends_the_episode_as_stuck(sandbox, task):
    # `cat` with no file waits on stdin: the prompt never comes back, whatever the model types next
    policy = ScriptedPolicy([reply(["cat\n"], duration=0.3), reply(["hello\n"], duration=0.3),
                             reply(["world\n"], duration=0.3), SOLVE, DONE, DONE])
    _, episode = run_episode(sandbox, task, policy, max_turns=6, max_repeats=None, max_blocked_turns=3)
    assert episode["ended_by"] == "stuck" and episode["n_turns"] == 3
    assert [t["rc"] for t in episode["turns"]] == [None, None, None]
    assert "still busy after 3 turns" in episode["turns"][-1]["stuck"]


def test_without_the_checks_a_repeating_model_runs_to_its_turn_cap(sandbox, task):
    same = reply(["ls /app\n"], duration=0.2)
    _, episode = run_episode(sandbox, task, ScriptedPolicy([same] * 4), max_turns=4, max_repeats=None,
                             max_blocked_turns=None)
    assert episode["ended_by"] == "max_turns" and episode["n_turns"] == 4


class SlowPolicy(ScriptedPolicy):
    """A model call that outlives the task's agent timeout (a slow or descheduled model server)."""

    def generate(self, messages_batch, **kw):
        import time

        time.sleep(self.delay)
        return super().generate(messages_batch, **kw)


def test_an_agent_timeout_ends_the_episode_cleanly_as_timeout(sandbox, task, caplog):
    import dataclasses

    from termagent.sandbox import run_trial

    policy = SlowPolicy([SOLVE, DONE, DONE])
    policy.delay = 3.0
    short = dataclasses.replace(task, agent_timeout_sec=2.0)
    result = run_trial(sandbox, short, TerminusAgent(policy, AgentConfig(deadline_margin_sec=0.5)))
    assert result.error["class"] == "AgentTimeoutError" and result.reward == 0.0  # graded, as Harbor does
    episode = result.agent_result  # the episode up to the timeout is kept, and says how it ended
    assert episode is not None and episode["ended_by"] == "timeout" and episode["error"] is None
    assert episode["turns"][0]["keystrokes"] == []  # the late reply was never typed into the killed container
    assert "No such container" not in caplog.text and "episode" not in caplog.text


def test_an_exec_after_the_kill_raises_trial_expired_not_an_engine_error(sandbox, task):
    from termagent.terminal import TrialExpired

    with sandbox.trial(task, attempt=0, agent_name="probe") as trial:
        assert trial.exec("echo alive").output.strip() == "alive"
        trial.kill()
        with pytest.raises(TrialExpired, match="agent timeout"):
            trial.exec("echo gone")


def test_a_failure_outside_the_model_leaves_the_trial_ungraded_with_its_turns(sandbox, task):
    # The policy server dies after the task was solved: the verifier would pass it, and with a reply that
    # solved nothing it would fail it; either way the model did not end its episode, so nothing is graded.
    from termagent.sandbox import run_trial

    policy = ScriptedPolicy([SOLVE, ConnectionError("the policy server went away")])
    result = run_trial(sandbox, task, TerminusAgent(policy, AgentConfig(max_turns=30, max_failed_replies=None)))
    assert result.reward is None and "verify" not in result.timings
    assert result.error == {"class": "ConnectionError", "message": "the policy server went away"}
    episode = result.agent_result
    assert episode["ended_by"] == "error" and episode["error"]["class"] == "ConnectionError"
    assert episode["n_turns"] == 2 and expand_turns(episode)[0]["rc"] == 0
