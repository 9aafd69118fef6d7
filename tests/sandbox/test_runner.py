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


def test_exec_output_keeps_stdout_and_stderr_in_the_order_they_were_written(sandbox, make_task):
    # The engine forwards stdout and stderr as two streams; read apart, they come back grouped.
    lines = [f"{'err' if i % 2 else 'out'} {i}" for i in range(200)]
    script = "; ".join(f"echo '{line}'{' >&2' if line.startswith('err') else ''}" for line in lines)
    with sandbox.trial(make_task("interleaved-exec")) as trial:
        assert trial.exec(script, timeout=30).output == "\n".join(lines) + "\n"
        assert trial.exec(["sh", "-c", script]).output == "\n".join(lines) + "\n"  # argv, no timeout


def test_agent_output_is_captured_and_bounded(sandbox, make_task):
    class Chatty:
        name = "chatty"

        def run(self, trial, task):
            for _ in range(3):
                trial.exec("head -c 100000 /dev/zero | tr '\\0' y; echo", timeout=30)

    result = run_trial(sandbox, make_task("chatty"), Chatty())
    assert result.agent_output.startswith("$ head -c 100000")
    assert len(result.agent_output) < sandbox.config.output_limit_bytes + 200
