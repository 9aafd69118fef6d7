"""Deterministic split of the task index into train and the held-out groups.

Groups: `train`; `eval` (hand-written held-out tasks); `eval_id` (held-out instances of training
families: in-distribution); `eval_ood` (every instance of a family never trained on: out-of-distribution).
A task with a `family` in its metadata is a generated instance (termagent.tasks.families): it is
`eval_ood` when its family is listed in `ood_families`, else `eval_id` when its hash point u < id_fraction,
else `train`; every training family, and every rung of it (metadata `rung`) with >= 2 instances, keeps >= 1
held-out and >= 1 training instance; a family with fewer than `id_min_per_family` eval_id instances then gets its
lowest-u train instances moved until it has that many (while it keeps one train instance), so every training family
has enough held-out instances to measure a gain on (issue 41: >= 8). Every other task is split train/eval as below.
Adding families or instances never moves
another task (its group depends on its own id, its family and the params only).

Train/eval split of the hand-written tasks:

Each task id is hashed with the seed to a point u in [0, 1); the task is held out for evaluation
when u < eval_fraction. A task's side therefore depends only on its own id and the seed: adding or
removing tasks never moves another one. Two guarantees on top, which only ever move the task
closest to the threshold (the lowest u to eval, the highest u to train):

- with >= 2 tasks there is at least one eval and one train task;
- stratify_by="difficulty": every difficulty with >= 2 tasks gets at least one of each as well,
  so the eval set never silently lacks the hard (or easy) tasks. That is all the stratification
  does; it does not balance proportions, which would make a task's side depend on its neighbours.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

from termagent.tasks.model import Task

Split = Literal["train", "eval", "eval_id", "eval_ood"]
HELD_OUT: tuple[str, ...] = ("eval", "eval_id", "eval_ood")
STRATA = ("difficulty", "category")


def unit_hash(seed: int, task_id: str) -> float:
    """(seed, id) -> [0, 1), uniform and stable across Python versions and machines."""
    digest = hashlib.sha256(f"{seed}\0{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _ensure_both(ids: list[str], u: dict[str, float], split: dict[str, Split], held: str = "eval") -> None:
    if len(ids) < 2:
        return
    if not any(split[i] == held for i in ids):
        split[min(ids, key=lambda i: (u[i], i))] = held
    if not any(split[i] == "train" for i in ids):
        split[max(ids, key=lambda i: (u[i], i))] = "train"


def assign_splits(tasks: Iterable[Task], eval_fraction: float, seed: int,
                  stratify_by: str | None = None) -> dict[str, Split]:
    """Task id -> "train" | "eval". eval_fraction must lie strictly between 0 and 1."""
    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must be > 0 and < 1, got {eval_fraction!r}")
    if stratify_by not in (None, *STRATA):
        raise ValueError(f"stratify_by must be one of {STRATA} or None, got {stratify_by!r}")
    tasks = list(tasks)
    u = {t.id: unit_hash(seed, t.id) for t in tasks}
    split: dict[str, Split] = {i: ("eval" if x < eval_fraction else "train") for i, x in u.items()}
    if stratify_by:
        groups: dict[str, list[str]] = defaultdict(list)
        for t in tasks:
            groups[str(t.metadata.get(stratify_by))].append(t.id)
        for ids in groups.values():
            _ensure_both(ids, u, split)
    _ensure_both(list(u), u, split)
    return dict(sorted(split.items()))


def family_of(task: Task) -> str | None:
    family = task.metadata.get("family")
    return str(family) if family else None


def assign_split_groups(tasks: Iterable[Task], eval_fraction: float, seed: int, stratify_by: str | None = None,
                        id_fraction: float = 0.2, ood_families: Iterable[str] = (),
                        id_min_per_family: int = 0) -> dict[str, Split]:
    """Task id -> split group (module docstring). Hand-written tasks get exactly what `assign_splits`
    gives them alone, so adding generated tasks never moves one of them."""
    if not 0 < id_fraction < 1:
        raise ValueError(f"id_fraction must be > 0 and < 1, got {id_fraction!r}")
    tasks = list(tasks)
    ood = set(ood_families)
    plain = [t for t in tasks if family_of(t) is None]
    split: dict[str, Split] = assign_splits(plain, eval_fraction, seed, stratify_by) if plain else {}
    by_family: dict[str, list[str]] = defaultdict(list)
    by_rung: dict[tuple[str, str], list[str]] = defaultdict(list)
    u: dict[str, float] = {}
    for t in tasks:
        family = family_of(t)
        if family is None:
            continue
        if family in ood:
            split[t.id] = "eval_ood"
            continue
        u[t.id] = unit_hash(seed, t.id)
        split[t.id] = "eval_id" if u[t.id] < id_fraction else "train"
        by_family[family].append(t.id)
        by_rung[(family, str(t.metadata.get("rung")))].append(t.id)
    # every rung of a training family, then the family: >= 1 held-out and >= 1 training instance
    for ids in [*by_rung.values(), *by_family.values()]:
        _ensure_both(ids, u, split, held="eval_id")
    rung_of = {i: key for key, ids in by_rung.items() for i in ids}
    for ids in by_family.values():
        train = sorted((i for i in ids if split[i] == "train"), key=lambda i: (u[i], i))
        missing = id_min_per_family - (len(ids) - len(train))
        for i in train:
            if missing <= 0 or sum(split[j] == "train" for j in ids) <= 1:
                break
            rung = by_rung[rung_of[i]]
            if len(rung) >= 2 and sum(split[j] == "train" for j in rung) <= 1:
                continue  # the last training instance of its rung stays
            split[i] = "eval_id"
            missing -= 1
    return dict(sorted(split.items()))
