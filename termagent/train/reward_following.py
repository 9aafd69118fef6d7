"""Reward-following checks (issue 41, item 1): does the RL code move the policy toward its reward?

T1 (synthetic): two runs from the same start, the same prompts and seed, rewarded by opposite synthetic verdicts
(termagent.rewards.synthetic: replies shorter / longer than the first batch's split point). A trainer that follows
its reward drives the share of short replies up in arm "short" and down in arm "long", from ~0.5 each;
`separation` judges the last steps.
T2 (real): one train task the start solves sometimes, its own tests as the reward; `improvement` judges the pass
rate of the last steps against the first.

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


def run_mt_grpo(params, agent, sandbox, tasks, root: Path, *, model_dir: Path, start_adapter: Path | None,
                verdict=None, engine=None) -> dict:
    """One MT-GRPO run (the stage's train_mt_grpo) under `root`; its metrics and per-step numbers."""
    from termagent.train.mt_grpo import train_mt_grpo

    metrics = train_mt_grpo(params, agent, sandbox, tasks, model_dir=model_dir, start_adapter=start_adapter,
                            out_dir=root / "model", rollouts_dir=root / "rollouts", metrics_dir=root / "metrics",
                            verdict=verdict, engine=engine)
    return {"per_step": per_step(root / "rollouts" / "rollouts.jsonl"), "steps": metrics["steps"],
            "skipped_steps": metrics["skipped_steps"], "threshold": getattr(verdict, "threshold", None)}
