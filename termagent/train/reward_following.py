"""Reward-following checks (issue 41, item 1): does the RL code move the policy toward its reward?

T1 (synthetic): two runs from the same start, the same prompts and seed, rewarded by opposite synthetic verdicts
(termagent.rewards.synthetic: replies shorter / longer than a split point per task: the task's first batch for
GRPO; for MT-GRPO, a batch of every task from the start policy before the first step, calibrate_mt_verdict). A
trainer that follows its reward drives the share of short replies up in arm "short" and down in arm "long", from
~0.5 each; `separation` judges the last steps.
T2 (real): one train task the start solves sometimes, its own tests as the reward; `improvement` judges the pass
rate of the last steps against the first. MT-GRPO's task is chosen on the start policy through its own rollout path
(calibrate_mt_task), among the candidates a sample stage's rates put in range.

Both run the stages' own trainers (`train_grpo`, `train_mt_grpo`), the verdict given through their `verdict`
hook. The per-step numbers are read from the run's rollouts.jsonl, over the rollouts each step drew (GRPO's
dynamic-sampling replacements, `resample` > 0, are left out: they are chosen for holding a pass and a fail).
scripts/bench_learns.py runs them on SmolLM2; tests/grpo/test_learns.py asserts the direction on the tiny model.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from termagent.rollouts import iter_jsonl


def per_step(rollouts: Path) -> dict[str, list[float]]:
    """Per training step (in order), over the rollouts it drew: the mean reward the run was trained on (the
    verdict, or the task's verifier) and the pass rate (verifier reward >= 1)."""
    rewards: dict[int, list[float]] = defaultdict(list)
    for row in iter_jsonl(rollouts):
        if row.get("resample", 0) == 0:
            rewards[row["training_step"]].append(float(row.get("verifier_reward") or 0.0))
    steps = sorted(rewards)
    return {"step": steps, "reward": [round(statistics.fmean(rewards[s]), 4) for s in steps],
            "pass_rate": [round(sum(r >= 1.0 for r in rewards[s]) / len(rewards[s]), 4) for s in steps]}


def separation(short_rewards: list[float], long_rewards: list[float], *, last: int = 3, a_min: float = 0.75,
               b_max: float = 0.25) -> dict:
    """T1's verdict, on one statistic for both arms: the share of replies shorter than the arm's cut. Arm A ("short")
    earns exactly that share; arm B ("long") earns the share above its cut, i.e. 1 - its short share (the cut lies
    between observed lengths). Passes when over the last `last` steps A's short share >= a_min and B's <= b_max;
    `direction` (the CI-sized claim): A's short share ends above B's."""
    a = statistics.fmean(short_rewards[-last:])
    b = 1.0 - statistics.fmean(long_rewards[-last:])
    return {"arm_a_short_share_last": round(a, 4), "arm_b_short_share_last": round(b, 4),
            "arm_a_short_share_first": short_rewards[0], "arm_b_short_share_first": round(1.0 - long_rewards[0], 4),
            "direction": a > b, "passed": a >= a_min and b <= b_max,
            "criterion": f"share of replies shorter than the cut, mean over the last {last} steps: arm A (rewarded "
                         f"for short) >= {a_min} and arm B (rewarded for long) <= {b_max}"}


def improvement(pass_rate: list[float], *, k: int = 3, min_gain: float = 0.3) -> dict:
    """T2's verdict: the pass rate of the last k steps minus that of the first k >= min_gain."""
    first, last = statistics.fmean(pass_rate[:k]), statistics.fmean(pass_rate[-k:])
    return {"first": round(first, 4), "last": round(last, 4), "gain": round(last - first, 4),
            "passed": last - first >= min_gain, "criterion": f"pass rate of the last {k} steps - first {k} >= {min_gain}"}


def run_grpo(config, root: Path, *, warmup: Path, tasks, sandbox, env_config, verdict=None, engine=None) -> dict:
    """One GRPO run (the stage's train_grpo) under `root`; its metrics and per-step numbers. `engine`: the stage's
    EngineConfig (rollouts on the OpenVINO engine with the live adapter), None for transformers' generate."""
    from termagent.train.grpo import GRPOPaths, train_grpo

    paths = GRPOPaths(warmup=warmup, out=root / "model", rollouts_dir=root / "rollouts",
                      checkpoints=root / "checkpoints", metrics_dir=root / "metrics")
    metrics = train_grpo(config, paths, tasks=tasks, sandbox=sandbox, env_config=env_config, progress=False,
                         verdict=verdict, engine=engine)
    return {"per_step": per_step(paths.rollouts_dir / "rollouts.jsonl"), "steps": metrics["steps"],
            "skipped_steps": metrics["skipped_steps"], "threshold": getattr(verdict, "threshold", None)}


def start_policy_rollouts(params, agent, sandbox, tasks, *, episodes: int, model_dir: Path,
                          start_adapter: Path | None, engine=None, work: Path, verdict=None) -> list[dict]:
    """`episodes` trajectories of every task rolled out once with the start policy through MT-GRPO's own rollout
    path (build_trainer's MultiTurnRollout on its generator: the OpenVINO engine with the start adapter synced, or
    the in-process model), judged by `verdict` (None: each task's verifier). The trainer is then dropped; nothing
    trains. Returns the episode records (sandbox TrialResult dicts: task_id, reward, None where not graded)."""
    import gc

    from termagent.train.engine_rollouts import engine_for
    from termagent.train.mt_grpo import build_trainer

    work.mkdir(parents=True, exist_ok=True)
    trainer = build_trainer(params, agent, sandbox, tasks, model_dir=model_dir, start_adapter=start_adapter,
                            work_dir=work, rollouts_dir=None, metrics_dir=None, verdict=verdict)
    engine_policy = engine_for(trainer, engine, model_dir)
    rows = [{"prompt": t.id, "task_id": t.id} for t in tasks for _ in range(episodes)]
    try:
        if engine_policy is not None:
            trainer.vllm_generation.sync_weights()  # the engine holds the start adapter only once synced
        trainer._rollout_inputs = rows  # what MTGRPOTrainer stashes before each rollout
        trainer.rollout_func([row["prompt"] for row in rows], trainer)
        return list(trainer.rollout_func.last_results)
    finally:
        if engine_policy is not None:
            engine_policy.close()
        del trainer
        gc.collect()  # the Trainer holds reference cycles: free its model before the next run builds its own


def calibrate_mt_verdict(params, agent, sandbox, tasks, verdict, *, model_dir: Path, start_adapter: Path | None,
                         engine=None, work: Path) -> dict:
    """Set a length verdict's cut for every task from the start policy, before MT-GRPO trains (`with_cuts` hands
    them to each arm's verdict, so both arms are judged on the same cuts): one group (num_generations
    trajectories) of every task from start_policy_rollouts, judged by `verdict`, which freezes each task's cut on it.

    Why: left to itself the verdict cuts each task on its first batch, and a task first drawn at step k is cut on the
    policy of step k, which has already moved: its share is re-centred on 0.5 and the movement before k is hidden.
    T1-MT on SmolLM2 (2026-12-07, 14 tasks, 2 per step): for 5 tasks the long arm's cut was 89-94 tokens per turn
    where the short arm's was 45-55. Returns {episodes, tasks_cut, tasks}."""
    records = start_policy_rollouts(params, agent, sandbox, tasks, episodes=params.num_generations,
                                    model_dir=model_dir, start_adapter=start_adapter, engine=engine, work=work,
                                    verdict=verdict)
    return {"episodes": len(records), "tasks_cut": sum(t.id in verdict.thresholds for t in tasks), "tasks": len(tasks)}


def pick_by_rate(rates: dict[str, dict], *, lo: float = 0.2, hi: float = 0.6, target: float = 0.4) -> str | None:
    """T2's task among `rates` ({task: {passes, n}}): a rate strictly inside (lo, hi), the nearest to `target`
    (ties by id); None when no task's rate is inside."""
    measured = {t: r["passes"] / r["n"] for t, r in rates.items() if r["n"]}
    inside = sorted((t for t, r in measured.items() if lo < r < hi), key=lambda t: (abs(measured[t] - target), t))
    return inside[0] if inside else None


def calibrate_mt_task(params, agent, sandbox, tasks, *, episodes: int, model_dir: Path, start_adapter: Path | None,
                      engine=None, work: Path) -> dict:
    """T2-MT's task, chosen on the start policy through MT-GRPO's own rollout path: `episodes` trajectories of every
    candidate (start_policy_rollouts, each task's verifier as the reward), then pick_by_rate over the graded ones.

    Why: the candidates' rates come from the sample stage, 4 attempts a task through another path (2 of 4 has a
    95 % interval of 0.07-0.93). T2-MT on SmolLM2 (run 16's warmup) drew background-job-0011 at 2 of 4 and its first
    three steps passed 0.625 each: outside the (0.2, 0.6) the test asks of its task, with 0.375 left to gain where
    0.3 is needed. The batch is drawn under another seed than the run's, so the run's first steps are fresh samples
    (a task chosen for a low draw then regresses toward its true rate: against the test, never for it).
    Returns {task, rates: {task: the sample stage's rates.json entry (solve_rates)}, episodes}."""
    from dataclasses import replace

    from termagent.tasks.split import family_of
    from termagent.train.sampling import PASS, solve_rates

    results = start_policy_rollouts(replace(params, seed=params.seed + 1), agent, sandbox, tasks, episodes=episodes,
                                    model_dir=model_dir, start_adapter=start_adapter, engine=engine, work=work)
    # as the sample stage tallies its episodes: an infrastructure failure (reward None) is left out of n, never a 0
    records = [{"task_id": r["task_id"], "reward": r["reward"],
                "passed": r["reward"] is not None and r["reward"] >= PASS,
                **{key: (r["agent_result"] or {}).get(key) for key in ("n_turns", "ended_by")}} for r in results]
    rates = solve_rates(records, {t.id: family_of(t) for t in tasks})
    return {"task": pick_by_rate(rates), "rates": rates, "episodes": len(records)}


def with_cuts(verdict, calibrated):
    """`verdict` judging on `calibrated`'s per-task cuts (frozen: a task it has no cut for gets one on its first
    batch, as uncalibrated)."""
    verdict.thresholds = dict(calibrated.thresholds)
    return verdict


def run_mt_grpo(params, agent, sandbox, tasks, root: Path, *, model_dir: Path, start_adapter: Path | None,
                verdict=None, engine=None) -> dict:
    """One MT-GRPO run (the stage's train_mt_grpo) under `root`; its metrics and per-step numbers."""
    from termagent.train.mt_grpo import train_mt_grpo

    metrics = train_mt_grpo(params, agent, sandbox, tasks, model_dir=model_dir, start_adapter=start_adapter,
                            out_dir=root / "model", rollouts_dir=root / "rollouts", metrics_dir=root / "metrics",
                            verdict=verdict, engine=engine)
    return {"per_step": per_step(root / "rollouts" / "rollouts.jsonl"), "steps": metrics["steps"],
            "skipped_steps": metrics["skipped_steps"], "threshold": getattr(verdict, "threshold", None)}
