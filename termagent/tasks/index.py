"""The task index, data/tasks.json: one record per task with its split, read by every stage that
picks tasks (demos and RL use split "train"; evaluation the held-out groups "eval", "eval_id",
"eval_ood" — see termagent.tasks.split).

File shape (sorted keys, tasks sorted by id, no timestamps: the same tasks give the same bytes):
    {"version": 1, "eval_fraction": 0.25, "split_seed": 0, "stratify_by": "difficulty",
     "id_fraction": 0.2, "ood_families": [...],
     "counts": {"eval": 10, "eval_id": 60, "eval_ood": 48, "train": 250},
     "tasks": [{"id", "family", "rung", "hash", "layout", "split", "path", "difficulty", "category", "tags",
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
from termagent.tasks.split import Split, assign_split_groups

INDEX_VERSION = 1


@dataclass
class TasksConfig:
    """params.yaml `tasks:` section."""

    # task dirs or dirs of task dirs: the bundled suite and the generated family instances
    dirs: list[str] = field(default_factory=lambda: ["data/tasks", "data/generated"])
    eval_fraction: float = 0.25  # share of hand-written tasks held out for evaluation (split "eval")
    split_seed: int = 0
    stratify_by: Literal["difficulty", "category"] | None = "difficulty"
    id_fraction: float = 0.2  # share of a training family's instances held out (split "eval_id")
    id_min_per_family: int = 8  # and at least this many of each (the lowest hash points move), one train kept
    # whole families held out (split "eval_ood"): one skill both have nothing of in training
    ood_families: list[str] = field(default_factory=lambda: ["sqlite-query", "tar-archive"])

    def __post_init__(self) -> None:
        if not 0 < self.eval_fraction < 1:
            raise ValueError(f"eval_fraction must be > 0 and < 1, got {self.eval_fraction}")
        if not 0 < self.id_fraction < 1:
            raise ValueError(f"id_fraction must be > 0 and < 1, got {self.id_fraction}")
        if self.id_min_per_family < 0:
            raise ValueError(f"id_min_per_family must be >= 0, got {self.id_min_per_family}")


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
        "family": task.metadata.get("family"),
        "rung": task.metadata.get("rung"),
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
                root: Path | None = None, id_fraction: float = 0.2, ood_families: list[str] | None = None,
                id_min_per_family: int = 0) -> dict[str, Any]:
    splits = assign_split_groups(tasks, eval_fraction, split_seed, stratify_by, id_fraction, ood_families or (),
                                 id_min_per_family)
    records = [task_record(t, splits[t.id], root) for t in sorted(tasks, key=lambda t: t.id)]
    return {
        "version": INDEX_VERSION,
        "eval_fraction": eval_fraction,
        "split_seed": split_seed,
        "stratify_by": stratify_by,
        "id_fraction": id_fraction,
        "id_min_per_family": id_min_per_family,
        "ood_families": sorted(ood_families or []),
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


def tasks_in_split(index_path: str | Path, split: Split | list[str] | tuple[str, ...] | None,
                   root: Path | None = None, verify_hash: bool = True) -> list[Task]:
    """Load the tasks of one split ("train" / "eval" / "eval_id" / "eval_ood"; a list: any of them;
    None: all) listed in an index. Relative paths
    are taken from `root` (default: the current directory). With verify_hash, a task whose files
    changed since the index was built is an error: rerun the `tasks` stage."""
    root = Path(root) if root is not None else Path.cwd()
    tasks = []
    for record in read_index(index_path)["tasks"]:
        if split is not None and record["split"] not in ((split,) if isinstance(split, str) else tuple(split)):
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
    `root`); the summary lines (counts per split group and difficulty). The `tasks` stage and
    `termagent tasks index` both run this."""
    tasks = discover_tasks(cfg.dirs)
    index = build_index(tasks, cfg.eval_fraction, cfg.split_seed, cfg.stratify_by, root=root,
                        id_fraction=cfg.id_fraction, ood_families=cfg.ood_families,
                        id_min_per_family=cfg.id_min_per_family)
    write_index(index, out)
    groups = ("train", "eval", "eval_id", "eval_ood")
    by_difficulty: dict[str, dict[str, int]] = {}
    for record in index["tasks"]:
        counts = by_difficulty.setdefault(str(record["difficulty"]), dict.fromkeys(groups, 0))
        counts[record["split"]] += 1
    lines = [f"{out}: {len(tasks)} tasks, " + ", ".join(f"{g} {index['counts'].get(g, 0)}" for g in groups)]
    lines += [f"  {d:>8}: " + "  ".join(f"{g} {c[g]:>3}" for g in groups) for d, c in sorted(by_difficulty.items())]
    return lines
