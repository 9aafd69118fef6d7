"""Curation end to end: rollouts + task dirs + judge -> the multi-turn RL task list under `out`.
Run by the `curate` stage (stages/curate.py) and `termagent curate` alike.

    summary = run_curation(rollouts, [Path("data/tasks")], Path("data/curated"), judge, CurateConfig(),
                           index=Path("data/tasks.json"))
"""

from __future__ import annotations

import logging
from pathlib import Path

from termagent.curate.outputs import write_curation
from termagent.curate.select import CurateConfig, curate_tasks, read_eval_ids, tasks_trained_by
from termagent.curate.weights import task_stats
from termagent.judge import load_task_contexts
from termagent.rollouts import ReadStats
from termagent.tasks.index import TasksConfig

log = logging.getLogger(__name__)


def resolve_eval_ids(tasks, index: Path | None, eval_ids: str | None, eval_fraction: float, split_seed: int
                     ) -> tuple[set[str], str]:
    """Eval ids and where they came from: --eval-ids, else the index's `split`, else the split rule."""
    if eval_ids:
        return {e.strip() for e in eval_ids.split(",") if e.strip()}, "--eval-ids"
    if index is not None:
        return read_eval_ids(index), str(index)
    from termagent.tasks.split import assign_splits

    splits = assign_splits(list(tasks.values()), eval_fraction, split_seed)
    return {t for t, s in splits.items() if s == "eval"}, f"assign_splits(eval_fraction={eval_fraction}, seed={split_seed})"


def run_curation(rollouts: Path | None, tasks_dirs: list[Path], out: Path, judge, config: CurateConfig,
                 index: Path | None = None, eval_ids: str | None = None, eval_fraction: float = TasksConfig.eval_fraction,
                 split_seed: int = TasksConfig.split_seed, rates: Path | None = None) -> dict:
    """`rates` (a sample stage's rates.json): the measured solve rates rank and filter the tasks; else the
    rollouts' rewards do."""
    tasks = load_task_contexts(tasks_dirs)
    evals, source = resolve_eval_ids(tasks, index, eval_ids, eval_fraction, split_seed)
    read = ReadStats(str(rollouts or rates))
    if rates is not None:
        from termagent.curate.weights import rate_stats
        from termagent.rollouts import read_rates

        stats = rate_stats(read_rates(rates))
        read.n_records = sum(s.n for s in stats.values())
    elif rollouts is None:
        raise ValueError("curate needs rollouts or measured solve rates")
    else:
        stats = task_stats(rollouts, read)
    warnings = []
    if read.n_records == 0:
        warnings.append(f"{rollouts}: no valid rollouts; nothing can be selected")
    if read.n_malformed:
        warnings.append(f"{rollouts}: {read.n_malformed} malformed line(s) skipped, first at line "
                        f"{read.malformed[0][0]}: {read.malformed[0][1]}")
    unknown = sorted(set(stats) - set(tasks))
    if unknown:
        warnings.append(f"{len(unknown)} task id(s) in the rollouts are not in the tasks dir: {unknown[:5]}")
    trained = tasks_trained_by(config.exclude_trained_by, warnings, ignore=config.exclude_ignores)
    for w in warnings:
        log.warning(w)
    result = curate_tasks(tasks, evals, stats, judge, config, measured=rates is not None, trained=trained)
    write_curation(result, out, warnings)
    return {"selected": len(result.selected), "source": str(rates or rollouts), "candidates": len(result.weights), "tasks": len(tasks),
            "eval": len(evals), "eval_source": source, "contaminated": len(result.contamination["excluded_train_ids"]),
            "trained_by_earlier_stages": len(trained),
            "judge": result.judge, "rollouts": read.n_records, "malformed_lines": read.n_malformed,
            "warnings": warnings}
