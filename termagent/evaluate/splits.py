"""Held-out split groups in evaluation: which tasks of each group an eval runs, and the metrics of each
group (`by_split` in metrics/eval/<model>.json: the same fields as the whole).

Groups (termagent.tasks.split): eval (hand-written held-out tasks), eval_id (held-out instances of
training families), eval_ood (whole families never trained on).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from termagent.evaluate.metrics import compute_metrics
from termagent.tasks.model import Task
from termagent.tasks.split import family_of, unit_hash


def select_held_out(tasks: Iterable[Task], split_of: dict[str, str], caps: dict[str, int],
                    seed: int = 0) -> list[Task]:
    """At most caps[group] tasks of each group (missing or 0: all of it), spread over families: the
    tasks of a group are dealt round-robin over its families (each family's in hash order), so a cap
    of 6 on eval_id takes one instance from each of 6 families rather than 6 from the first one.
    Deterministic, and a task's selection does not depend on tasks of other groups."""
    by_group: dict[str, dict[str | None, list[Task]]] = defaultdict(lambda: defaultdict(list))
    for t in tasks:
        by_group[split_of[t.id]][family_of(t)].append(t)
    chosen: list[Task] = []
    for group, families in sorted(by_group.items()):
        queues = [sorted(ts, key=lambda t: (unit_hash(seed, t.id), t.id))
                  for _, ts in sorted(families.items(), key=lambda kv: str(kv[0]))]
        dealt: list[Task] = []
        while any(queues):
            for q in queues:
                if q:
                    dealt.append(q.pop(0))
        cap = int(caps.get(group, 0) or 0)
        chosen += dealt[:cap] if cap else dealt
    return sorted(chosen, key=lambda t: t.id)


def metrics_by_split(records: list[dict], split_of: dict[str, str], *, protocol: dict[str, Any],
                     wall_s: float, model: str | None = None) -> dict[str, dict[str, Any]]:
    """compute_metrics over the records of each split group (wall_s is the whole eval's: the groups
    run interleaved)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[split_of.get(r["task_id"], "unknown")].append(r)
    return {g: compute_metrics(rs, protocol=protocol, wall_s=wall_s, model=model) for g, rs in sorted(groups.items())}
