"""Which tasks each model solves, the overlap between models, and each model against the base with a
paired bootstrap confidence interval over tasks.

Pairing by task matters: tasks differ far more in difficulty than models do, so resampling tasks
(and taking both models' pass rates on the same resampled tasks) gives a much tighter and honest
interval than two independent stderr bars. One eval on ~89 tasks cannot separate 7.87% from 10.11%;
this interval says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def solved_tasks(per_task: dict[str, float]) -> set[str]:
    """Tasks a model solved at least once (pass rate > 0)."""
    return {task for task, rate in per_task.items() if rate > 0}


def overlap_table(per_task_by_model: dict[str, dict[str, float]]) -> list[dict]:
    """Tasks grouped by the exact set of models that solved them, largest group of models first:
    [{"models": [...], "tasks": [...]}, ...]; the group with models == [] is "solved by none".
    Only tasks every model was evaluated on are compared."""
    models = sorted(per_task_by_model)
    common = set.intersection(*(set(p) for p in per_task_by_model.values())) if models else set()
    solved = {m: solved_tasks(per_task_by_model[m]) for m in models}
    groups: dict[tuple[str, ...], list[str]] = {}
    for task in sorted(common):
        key = tuple(m for m in models if task in solved[m])
        groups.setdefault(key, []).append(task)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    return [{"models": list(k), "tasks": v} for k, v in ordered]


@dataclass(frozen=True)
class Comparison:
    model: str
    base: str
    n_tasks: int  # tasks both were evaluated on
    accuracy: float  # mean per-task pass rate of `model` on the common tasks
    base_accuracy: float
    diff: float  # accuracy - base_accuracy
    ci_low: float
    ci_high: float
    confidence: float
    n_resamples: int
    p_not_better: float  # share of resamples with diff <= 0 (one-sided bootstrap p)

    @property
    def significant(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


def paired_bootstrap(
    per_task: dict[str, float],
    base_per_task: dict[str, float],
    *,
    model: str = "model",
    base: str = "base",
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Difference in mean per-task pass rate (model − base) with a percentile bootstrap interval:
    resample the common tasks with replacement, `n_resamples` times, seeded."""
    tasks = sorted(set(per_task) & set(base_per_task))
    if not tasks:
        raise ValueError(f"{model} and {base} share no evaluated task: nothing to compare")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    a = np.array([per_task[t] for t in tasks], dtype=float)
    b = np.array([base_per_task[t] for t in tasks], dtype=float)
    d = a - b
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n_resamples, len(d)))
    means = d[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Comparison(
        model=model,
        base=base,
        n_tasks=len(tasks),
        accuracy=float(a.mean()),
        base_accuracy=float(b.mean()),
        diff=float(d.mean()),
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        n_resamples=n_resamples,
        p_not_better=float((means <= 0).mean()),
    )


# The model each stage trains from (dvc.yaml): warmup on the base, GRPO and SFT on the warmup, DPO on SFT, MT-GRPO
# on DPO. A start that was not evaluated (a warmup that was off is the base; DPO without a pair is the SFT adapter)
# is replaced by its own start, so every model is compared with the model it effectively continues.
STARTS = {"warmup": "base", "grpo": "warmup", "sft": "warmup", "dpo": "sft", "mt_grpo": "dpo"}


def effective_start(model: str, evaluated: set[str]) -> str | None:
    """The nearest evaluated model up `STARTS` from `model` (None for the base or an unknown name)."""
    start = STARTS.get(model)
    while start is not None and start not in evaluated:
        start = STARTS.get(start)
    return start
