"""The local eval's trials: held-out tasks × attempts through the sandbox with one agent, and each trial as a
trajectory (the agent's episode record plus the reward, error and verifier output the sandbox added). The agent
is the TerminusAgent loop that demos and multi-turn RL use, so a model is evaluated in the format it was trained in.

    trajectories, wall_s = run_local_eval(sandbox, tasks, agent, attempts=2, concurrency=2, model="base")
    trajectories, wall_s = run_trial_plan(sandbox, attempt_plan(tasks, greedy, range(1))
                                          + attempt_plan(tasks, sampled, range(1, 3)), concurrency=8, model="sft")
"""

from __future__ import annotations

import time


def trajectory_from_trial(trial: dict, *, model: str) -> dict:
    """One trial (TrialResult.to_dict()) as a trajectory: the agent's episode record, with the
    reward, error and verifier output the sandbox added after the agent phase."""
    episode = dict(trial.get("agent_result") or {})
    error = trial.get("error") or episode.get("error")
    return {
        **episode,
        "task_id": trial["task_id"],
        "attempt": int(trial.get("attempt", 0)),
        "model": episode.get("model") or model,
        "reward": trial.get("reward"),
        "rewards": trial.get("rewards"),
        "passed": trial.get("passed"),
        "total": trial.get("total"),
        "error": error,
        "retried_errors": trial.get("retried_errors") or [],
        "n_turns": episode.get("n_turns", len(episode.get("turns") or [])),
        "tokens": episode.get("tokens") or {"in": 0, "out": 0},
        "summarizations": episode.get("summarizations") or [],
        "turns": episode.get("turns") or [],
        "image": trial.get("image"),
        "timings": trial.get("timings"),
        "verifier_output": trial.get("verifier_output"),
    }


def run_local_eval(
    sandbox, tasks: list, agent, *, attempts: int, concurrency: int, model: str, progress: bool = True,
    description: str | None = None,
) -> tuple[list[dict], float]:
    """Run every task `attempts` times (attempt 0..attempts-1) with at most `concurrency` trials at
    once; progress lines on stderr named `description` (default "eval <model>"). Returns (trajectories,
    wall seconds)."""
    if attempts < 1:
        raise ValueError(f"eval.attempts must be >= 1, got {attempts}")
    return run_trial_plan(sandbox, attempt_plan(tasks, agent, range(attempts)), concurrency=concurrency, model=model,
                          progress=progress, description=description)


def attempt_plan(tasks: list, agent, attempts) -> list[tuple]:
    """(task, agent, attempt) for each attempt number and task, attempt-major: with bounded concurrency every task
    gets its first attempt early."""
    return [(task, agent, attempt) for attempt in attempts for task in tasks]


def run_trial_plan(sandbox, work: list[tuple], *, concurrency: int, model: str, progress: bool = True,
                   description: str | None = None) -> tuple[list[dict], float]:
    """Run (task, agent, attempt) trials, at most `concurrency` at once (each trial with its own agent: the greedy
    and the sampled attempts of an eval share one run); progress lines on stderr named `description` (default
    "eval <model>"). Returns (trajectories, wall seconds)."""
    from termagent.sandbox import run_trials  # heavy (docker SDK): imported when an eval runs

    started = time.monotonic()
    results = run_trials(sandbox, work, concurrency=concurrency, progress=progress,
                         description=description or f"eval {model}")
    wall_s = time.monotonic() - started
    trials = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]
    return [trajectory_from_trial(t, model=model) for t in trials], wall_s
