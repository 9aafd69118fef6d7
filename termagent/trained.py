"""Which task families an RL stage trained on, from the rollouts it wrote: `<rollouts_dir>/families.json`.

    record = write_trained_families("grpo", Path("data/rollouts/grpo"), Path("data/tasks.json"))
    # {"stage": "grpo", "families": ["chmod-mode", "grep-count"], "tasks": [...], "n_rollouts": 40}

The families are those of the tasks in `<rollouts_dir>/rollouts.jsonl` (every rollout names its `task_id`), read
through the task index; each must be a train task (the RL stages choose from train tasks only: a held-out one here
is a contamination, and an error). The report measures each RL stage's gain on the held-out eval_id instances of
these families (`metrics/trained_families.json`, termagent.report.gains).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from termagent import atomic


def trained_families(rollouts: Path, index: Path) -> dict[str, Any]:
    """{"families", "tasks", "n_rollouts"} of the rollouts file `rollouts` (JSON lines with `task_id`)."""
    from termagent.tasks.index import read_index

    rows = {r["id"]: r for r in read_index(index)["tasks"]}
    if not Path(rollouts).is_file():
        raise ValueError(f"{rollouts}: no rollouts file, so no record of the families the stage trained on")
    tasks: set[str] = set()
    n = 0
    for number, line in enumerate(Path(rollouts).read_text().splitlines(), 1):
        if line.strip():
            try:
                tasks.add(json.loads(line)["task_id"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{rollouts}:{number}: not a rollout record with a task_id ({e})") from None
            n += 1
    unknown = sorted(t for t in tasks if t not in rows)
    held_out = sorted(t for t in tasks if t in rows and rows[t]["split"] != "train")
    if unknown or held_out:
        raise ValueError(f"{rollouts}: rollouts on tasks that are not train tasks of {index}: "
                         f"{', '.join(unknown + held_out)}")
    return {"families": sorted({str(rows[t].get("family") or t) for t in tasks}), "tasks": sorted(tasks),
            "n_rollouts": n}


def write_trained_families(stage: str, rollouts_dir: Path, index: Path) -> dict[str, Any]:
    """Write <rollouts_dir>/families.json for `stage` from <rollouts_dir>/rollouts.jsonl; returns the record."""
    record = {"stage": stage, **trained_families(Path(rollouts_dir) / "rollouts.jsonl", index)}
    atomic.write_json(Path(rollouts_dir) / "families.json", record)
    return record
