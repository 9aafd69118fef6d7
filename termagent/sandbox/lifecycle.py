"""One trial's lifecycle: task image -> container -> agent phase (under its timeout) -> verifier -> result.

    sandbox = Sandbox(SandboxConfig(base_image=...))
    result = run_trial(sandbox, task, OracleAgent())            # one trial, a TrialResult
    results = run_trials(sandbox, [(task, agent, 0), ...])       # bounded pool, progress on stderr

The containers come from the pool (termagent/sandbox/pool.py); run_trials announces the trials next in
line so their containers start ahead, and removes finished ones in the background.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Protocol

from termagent.sandbox.errors import AgentTimeoutError, BuildError, OutOfMemoryError, SandboxError
from termagent.sandbox.pool import Sandbox
from termagent.sandbox.progress import TrialProgress
from termagent.sandbox.trial import Trial
from termagent.tasks.model import Task
from termagent.truncate import limit_output

log = logging.getLogger(__name__)

# Errors Harbor grades (the trial counts, with reward 0) rather than retries as infrastructure failures.
GRADED_ERRORS = (AgentTimeoutError, OutOfMemoryError)


class Agent(Protocol):
    name: str

    def run(self, trial: Trial, task: Task) -> dict | None:
        """Work on the task through `trial` until done or `trial.deadline`; return a free-form record."""


@dataclass
class TrialResult:
    task_id: str
    agent: str
    attempt: int
    reward: float | None  # None: not graded (infrastructure error); 0.0 on graded errors (agent timeout)
    rewards: dict[str, float]
    passed: int | None
    total: int | None
    error: dict | None  # {"class": ..., "message": ...}
    image: dict  # {"tag", "id", "substituted_from", "substituted_to", "cached"}
    timings: dict[str, float]  # build, create, agent, verify (of which tests), remove, total (seconds)
    agent_output: str = ""
    verifier_output: str = ""
    agent_result: dict | None = None
    oom_killed: bool = False
    # The errors of earlier runs of this trial that run_trials retried (ungraded failures, `config.retries`).
    retried_errors: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def run_trial(sandbox: Sandbox, task: Task, agent: Agent, *, attempt: int = 0) -> TrialResult:
    """One full trial. Never raises for a task's failure: the error is recorded in the result.
    Its container is gone when it returns."""
    return _run_trial(sandbox, task, agent, attempt=attempt, remove_in_background=False)


def _run_trial(sandbox: Sandbox, task: Task, agent: Agent, *, attempt: int,
               remove_in_background: bool) -> TrialResult:
    t0 = time.monotonic()
    limit = sandbox.config.output_limit_bytes
    result = TrialResult(task_id=task.id, agent=agent.name, attempt=attempt, reward=None, rewards={},
                         passed=None, total=None, error=None, image={}, timings={})
    trial = None
    try:
        start = time.monotonic()
        image = sandbox.prepare(task)
        result.image = image.to_dict()
        result.timings["build"] = time.monotonic() - start
        with sandbox.trial(task, attempt=attempt, agent_name=agent.name, image=image,
                           remove_in_background=remove_in_background) as trial:
            start = time.monotonic()
            try:
                result.agent_result = _run_agent(trial, task, agent)
            finally:
                result.timings["agent"] = time.monotonic() - start
                result.agent_output = limit_output(trial.agent_output, limit)
            start = time.monotonic()
            try:
                verdict = trial.verify()
            finally:
                result.timings["verify"] = time.monotonic() - start
            if verdict.tests_s is not None:
                result.timings["tests"] = verdict.tests_s  # the test command's own run time, inside
            result.reward, result.rewards = verdict.reward, verdict.rewards
            result.passed, result.total = verdict.passed, verdict.total
            result.verifier_output = limit_output(verdict.output, limit)
    except Exception as e:
        result.error = {"class": type(e).__name__, "message": str(e)[:4000]}
        if getattr(e, "record", None) is not None and result.agent_result is None:
            result.agent_result = e.record  # the episode up to the timeout (its turns stay in the trajectory)
        if getattr(e, "output", None) and not result.verifier_output:  # a VerifierError's output
            result.verifier_output = limit_output(e.output, limit)
        if isinstance(e, GRADED_ERRORS):
            result.reward, result.rewards = 0.0, {"reward": 0.0}
        if not isinstance(e, SandboxError):
            log.exception("trial %s/%s attempt %d failed", task.id, agent.name, attempt)
    finally:
        if trial is not None:
            # Passed by reference: a background removal adds its "remove_engine" when done (run_trials
            # waits for that before returning).
            if getattr(trial, "verifier_pythons", None):  # interpreters provided to the verifier only
                result.image = {**result.image, "verifier_pythons": trial.verifier_pythons}
            trial.timings.update({k: v for k, v in result.timings.items()})
            result.timings = trial.timings
            result.oom_killed = trial.oom_killed
        result.timings["total"] = time.monotonic() - t0
    return result


def _run_agent(trial: Trial, task: Task, agent: Agent) -> dict | None:
    """Run the agent in a worker thread under the task's agent timeout; on expiry kill the container
    (which ends every exec the agent is blocked in) and raise AgentTimeoutError."""
    trial.start_agent_phase(task.agent_timeout_sec)
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["record"] = agent.run(trial, task)
        except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread)
            outcome["error"] = e

    worker = threading.Thread(target=work, name=f"agent-{task.id}", daemon=True)
    worker.start()
    worker.join(trial.remaining)
    if worker.is_alive():
        trial.kill()  # from here every exec of the agent raises TrialExpired: it ends its episode as "timeout"
        worker.join(5)  # let it see its exec end; a thread stuck elsewhere (a model call) is abandoned (daemon)
        raise AgentTimeoutError(f"agent {agent.name} ran past the agent timeout ({task.agent_timeout_sec:g} s)",
                                record=outcome.get("record"))
    trial.end_agent_phase()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("record")


def run_trials(sandbox: Sandbox, specs: Sequence[tuple[Task, Agent, int]], *, concurrency: int | None = None,
               progress: bool = True, description: str = "trials") -> list[TrialResult]:
    """Run many trials on a bounded thread pool; results in the order of `specs`. Containers for the
    trials next in line are started ahead (`config.warm_pool`); finished ones are removed in the
    background (`config.background_remove`), and every removal is done before this returns. `progress`: report
    done/total, passes, elapsed and ETA on stderr (a bar on a terminal, periodic lines in a log:
    termagent.sandbox.progress). Trials that end ungraded (an infrastructure failure: reward None) run again,
    up to `config.retries` more rounds, as Harbor retries its trials' infrastructure exceptions; a result
    keeps the earlier runs' errors in `retried_errors`, and what still fails stays ungraded."""

    results: list[TrialResult | None] = [None] * len(specs)
    todo = list(range(len(specs)))
    for round_ in range(sandbox.config.retries + 1):
        label = description if round_ == 0 else f"{description} (retry {round_}: {len(todo)} ungraded)"
        for i, result in zip(todo, _run_round(sandbox, [specs[i] for i in todo], concurrency, progress, label)):
            earlier = results[i]
            if earlier is not None:  # a retry: keep what the earlier runs failed with
                result.retried_errors = [*earlier.retried_errors, earlier.error]
            results[i] = result
        todo = [i for i in todo if _retryable(results[i])]
        if not todo:
            break
        if round_ < sandbox.config.retries:
            log.warning("%d of %d trials ended ungraded (%s): running them again", len(todo), len(specs),
                        ", ".join(sorted({results[i].error["class"] for i in todo})))
    return results  # type: ignore[return-value]


def _retryable(result: TrialResult) -> bool:
    """An ungraded trial whose failure may not recur: not the model's (graded) and not an image that did not
    build (a task's own Dockerfile fails the same way again)."""
    return result.reward is None and result.error is not None and result.error["class"] != BuildError.__name__


def _run_round(sandbox: Sandbox, specs: Sequence[tuple[Task, Agent, int]], concurrency: int | None,
               progress: bool, description: str) -> list[TrialResult]:
    workers = max(1, min(concurrency or sandbox.config.concurrency, len(specs) or 1))
    background = sandbox.config.background_remove
    results: list[TrialResult | None] = [None] * len(specs)
    # The first `workers` trials start at once; the pool then takes the rest in order, so that is the
    # order in which their containers are prestarted.
    upcoming = [(task, agent.name, attempt) for task, agent, attempt in specs[workers:]]
    try:
        sandbox.expect(upcoming)
        with (TrialProgress(description, len(specs), enabled=progress) as report,
              ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trial") as pool):
            futures = {pool.submit(_run_trial, sandbox, task, agent, attempt=attempt,
                                   remove_in_background=background): i
                       for i, (task, agent, attempt) in enumerate(specs)}
            for future in as_completed(futures):
                result = results[futures[future]] = future.result()
                report.advance(passed=result.reward is not None and result.reward >= 1.0,
                               error=result.error is not None)
    finally:
        sandbox.forget(upcoming)  # all claimed unless a trial failed before starting its container
        sandbox.drain()
    return results  # type: ignore[return-value]

