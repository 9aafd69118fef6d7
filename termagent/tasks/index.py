"""The task index, data/tasks.json: one record per task with its split, read by every stage that
picks tasks (demos and RL use split "train", evaluation uses "eval").

File shape (sorted keys, tasks sorted by id, no timestamps: the same tasks give the same bytes):
    {"version": 1, "eval_fraction": 0.25, "split_seed": 0, "stratify_by": "difficulty",
     "counts": {"eval": 10, "train": 30},
     "tasks": [{"id", "hash", "layout", "split", "path", "difficulty", "category", "tags",
                "agent_timeout_sec", "verifier_timeout_sec", "network"}, ...]}
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from termagent import atomic
from termagent.tasks.load import discover_tasks, load_task
from termagent.tasks.model import Task, TaskError
from termagent.tasks.split import Split, assign_splits

INDEX_VERSION = 1


@dataclass
class TasksConfig:
    """params.yaml `tasks:` section."""

    dirs: list[str] = field(default_factory=lambda: ["data/tasks"])  # task dirs or dirs of task dirs
    eval_fraction: float = 0.25  # share of tasks held out for evaluation
    split_seed: int = 0
    stratify_by: Literal["difficulty", "category"] | None = "difficulty"

    def __post_init__(self) -> None:
        if not 0 < self.eval_fraction < 1:
            raise ValueError(f"eval_fraction must be > 0 and < 1, got {self.eval_fraction}")


def _display_path(path: Path, root: Path | None) -> str:
    """Relative to the repository root when inside it (portable across checkouts), else absolute."""
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.resolve().as_posix()


def task_record(task: Task, split: Split, root: Path | None = None) -> dict[str, Any]:
    return {
        "id": task.id,
        "hash": task.content_hash,
        "layout": task.layout,
        "split": split,
        "path": _display_path(task.path, root),
        "difficulty": task.difficulty,
        "category": task.category,
        "tags": task.tags,
        "agent_timeout_sec": task.agent_timeout_sec,
        "verifier_timeout_sec": task.verifier_timeout_sec,
        "network": "public" if task.environment.network else "no-network",
    }


def build_index(tasks: list[Task], eval_fraction: float, split_seed: int, stratify_by: str | None = None,
                root: Path | None = None) -> dict[str, Any]:
    splits = assign_splits(tasks, eval_fraction, split_seed, stratify_by)
    records = [task_record(t, splits[t.id], root) for t in sorted(tasks, key=lambda t: t.id)]
    return {
        "version": INDEX_VERSION,
        "eval_fraction": eval_fraction,
        "split_seed": split_seed,
        "stratify_by": stratify_by,
        "counts": dict(sorted(Counter(r["split"] for r in records).items())),
        "tasks": records,
    }


def index_json(index: dict[str, Any]) -> str:
    return json.dumps(index, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_index(index: dict[str, Any], path: str | Path) -> Path:
    """Atomic write (tmp file + rename): a reader never sees half an index."""
    return atomic.write_text(path, index_json(index))


def read_index(path: str | Path) -> dict[str, Any]:
    index = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(index, dict) or index.get("version") != INDEX_VERSION or not isinstance(index.get("tasks"), list):
        raise ValueError(f"{path}: not a task index of version {INDEX_VERSION}")
    return index


def tasks_in_split(index_path: str | Path, split: Split | None, root: Path | None = None,
                   verify_hash: bool = True) -> list[Task]:
    """Load the tasks of one split ("train" / "eval", None: all) listed in an index. Relative paths
    are taken from `root` (default: the current directory). With verify_hash, a task whose files
    changed since the index was built is an error: rerun the `tasks` stage."""
    root = Path(root) if root is not None else Path.cwd()
    tasks = []
    for record in read_index(index_path)["tasks"]:
        if split is not None and record["split"] != split:
            continue
        task = load_task(root / record["path"])
        if verify_hash and task.content_hash != record["hash"]:
            stale = (f"{index_path}: hash of {record['id']} is stale (files changed since the index "
                     "was built; run `dvc repro tasks`)")
            raise TaskError(task.path, [stale])
        tasks.append(task)
    return tasks


def index_tasks(cfg: TasksConfig, out: str | Path, root: Path) -> list[str]:
    """Discover every task under `cfg.dirs`, split and write the index to `out` (paths relative to
    `root`); the summary lines (counts per split and difficulty). The `tasks` stage and `termagent tasks
    index` both run this."""
    tasks = discover_tasks(cfg.dirs)
    index = build_index(tasks, cfg.eval_fraction, cfg.split_seed, cfg.stratify_by, root=root)
    write_index(index, out)
    by_difficulty: dict[str, dict[str, int]] = {}
    for record in index["tasks"]:
        counts = by_difficulty.setdefault(str(record["difficulty"]), {"train": 0, "eval": 0})
        counts[record["split"]] = counts.get(record["split"], 0) + 1
    counts = index["counts"]
    lines = [f"{out}: {len(tasks)} tasks, train {counts.get('train', 0)}, eval {counts.get('eval', 0)}"]
    lines += [f"  {d:>8}: train {c['train']:>3}  eval {c['eval']:>3}" for d, c in sorted(by_difficulty.items())]
    return lines
