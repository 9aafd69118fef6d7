"""Whole trials: oracle and nop on the fixture tasks, the agent timeout, agent failures, and containers
that never outlive their trial."""

from __future__ import annotations

import pytest

from termagent.sandbox import reaper, run_trial, run_trials
from termagent.sandbox.agents import NopAgent, OracleAgent
from termagent.tasks.load import load_task

from .conftest import FIXTURES

pytestmark = pytest.mark.docker


def our_containers(client) -> list:
    return client.containers.list(all=True, filters={"label": f"{reaper.OWNER_LABEL}={reaper.owner_id()}"})


def test_oracle_solves_and_nop_fails_the_fixture_tasks(sandbox, docker_client):
    tasks = [load_task(FIXTURES / "upper-case"), load_task(FIXTURES / "json-reward")]
    specs = [(task, agent, 0) for task in tasks for agent in (OracleAgent(), NopAgent())]
    results = run_trials(sandbox, specs, concurrency=2, progress=False)
    by_key = {(r.task_id, r.agent): r for r in results}
    assert [(r.task_id, r.agent) for r in results] == [(t.id, a.name) for t, a, _ in specs]  # input order
    assert by_key["upper-case", "oracle"].reward == 1.0 and by_key["upper-case", "nop"].reward == 0.0
    assert by_key["json-reward", "oracle"].rewards == {"reward": 1.0, "files": 1.0}
    assert by_key["json-reward", "nop"].rewards["files"] == pytest.approx(2 / 3)
    # Public base images were swapped for the local one, and the trial says so.
    assert by_key["upper-case", "oracle"].image["substituted_from"] == "debian:bookworm-slim"
    assert by_key["json-reward", "nop"].image["substituted_from"] == "ubuntu:24.04"
    oracle = by_key["upper-case", "oracle"]
    assert oracle.agent_result["rc"] == 0 and oracle.error is None
    assert set(oracle.timings) >= {"build", "create", "agent", "verify", "remove", "total"}
    assert oracle.to_dict()["timings"] == oracle.timings
    assert not our_containers(docker_client)


def test_solution_is_removed_before_the_tests_run(sandbox, make_task):
    test_sh = ("#!/bin/bash\nif [ -e /solution ]; then echo 0 > /logs/verifier/reward.txt; "
               "else echo 1 > /logs/verifier/reward.txt; fi\n")
    task = make_task("solution-hidden", test_sh=test_sh, solve_sh="#!/bin/bash\ntouch /tmp/solved\n")
    result = run_trial(sandbox, task, OracleAgent())
    assert result.error is None and result.reward == 1.0


class SleepyAgent:
    name = "sleepy"

    def run(self, trial, task):
        trial.exec("sleep 600")  # no exec timeout: only the trial's agent timeout can end this


def test_agent_timeout_is_graded_zero_and_the_container_is_killed(sandbox, make_task, docker_client):
    task = make_task("agent-timeout", agent_timeout=2)
    result = run_trial(sandbox, task, SleepyAgent())
    assert result.error["class"] == "AgentTimeoutError"
    assert result.reward == 0.0 and result.rewards == {"reward": 0.0}
    assert "verify" not in result.timings  # the tests never ran
    assert not our_containers(docker_client)


class BrokenAgent:
    name = "broken"

    def run(self, trial, task):
        raise RuntimeError("the policy server is down")


def test_agent_crash_is_recorded_as_an_ungraded_error(sandbox, make_task, docker_client):
    result = run_trial(sandbox, make_task("agent-crash"), BrokenAgent())
    assert result.error == {"class": "RuntimeError", "message": "the policy server is down"}
    assert result.reward is None
    assert not our_containers(docker_client)


class FlakyOnce:
    """Loses its first run of each trial to an error outside the model, then works."""

    name = "flaky"

    def __init__(self):
        self.runs: dict[str, int] = {}

    def run(self, trial, task):
        self.runs[task.id] = self.runs.get(task.id, 0) + 1
        if self.runs[task.id] == 1:
            raise ConnectionError("the policy server went away")
        return {"rc": trial.exec("true", timeout=10).rc}


def test_run_trials_runs_an_ungraded_trial_again_and_keeps_its_first_error(sandbox, make_task, monkeypatch):
    task = make_task("flaky-agent")
    agent = FlakyOnce()
    [result] = run_trials(sandbox, [(task, agent, 0)], concurrency=1, progress=False)
    assert agent.runs == {task.id: 2}
    assert result.error is None and result.reward is not None and result.agent_result == {"rc": 0}
    assert result.retried_errors == [{"class": "ConnectionError", "message": "the policy server went away"}]
    monkeypatch.setattr(sandbox.config, "retries", 0)  # off: the failure is the result, ungraded
    [result] = run_trials(sandbox, [(task, FlakyOnce(), 0)], concurrency=1, progress=False)
    assert result.reward is None and result.error["class"] == "ConnectionError" and result.retried_errors == []


def test_exec_output_keeps_stdout_and_stderr_in_the_order_they_were_written(sandbox, make_task):
    # The engine forwards stdout and stderr as two streams; read apart, they come back grouped.
    lines = [f"{'err' if i % 2 else 'out'} {i}" for i in range(200)]
    script = "; ".join(f"echo '{line}'{' >&2' if line.startswith('err') else ''}" for line in lines)
    with sandbox.trial(make_task("interleaved-exec")) as trial:
        assert trial.exec(script, timeout=30).output == "\n".join(lines) + "\n"
        assert trial.exec(["sh", "-c", script]).output == "\n".join(lines) + "\n"  # argv, no timeout


def test_exec_output_survives_a_client_slow_to_read_the_response_headers(sandbox, make_task, monkeypatch):
    # Under load (a trainer on both cores) the agent's thread can reach the exec's response headers after the
    # command already wrote and exited: http.client's buffered header read then takes the output along, and a
    # read from the bare socket returned nothing with exit 0 (run 13: 59 episodes' terminals lost). Holding
    # every response back reproduces it on an idle machine (10 of 10 outputs lost before the fix).
    import http.client
    import time

    begin = http.client.HTTPResponse.begin
    with sandbox.trial(make_task("slow-client-exec")) as trial:
        monkeypatch.setattr(http.client.HTTPResponse, "begin", lambda self: (time.sleep(0.3), begin(self))[1])
        outputs = [trial.exec(f"echo out {i}", timeout=30) for i in range(5)]
        monkeypatch.undo()
    assert [(r.rc, r.output) for r in outputs] == [(0, f"out {i}\n") for i in range(5)]


def test_agent_output_is_captured_and_bounded(sandbox, make_task):
    class Chatty:
        name = "chatty"

        def run(self, trial, task):
            for _ in range(3):
                trial.exec("head -c 100000 /dev/zero | tr '\\0' y; echo", timeout=30)

    result = run_trial(sandbox, make_task("chatty"), Chatty())
    assert result.agent_output.startswith("$ head -c 100000")
    assert len(result.agent_output) < sandbox.config.output_limit_bytes + 200
