"""Contamination guard: training tasks that near-duplicate an evaluation task.

Similarity is the Jaccard index of word n-gram shingles (n=3 by default) over instruction + tests
text, computed exactly: task pools are hundreds, not millions, so an exact all-pairs comparison is
cheap and has no false negatives (MinHash would only approximate this number).

Shingles of the verifier boilerplate every task shares (the standard tests/test.sh, the generated tests'
imports and input-untouched check) are left out: they say nothing about what a task asks.

Task families (termagent.tasks.families) are known: a held-out instance of a training family
(split eval_id) is a near-duplicate of its training siblings by design. Such same-family pairs are
reported under `in_distribution` (per family: pairs at or above the threshold, the highest similarity)
and never exclude the training sibling; an eval task is still never trained on (it is not in `train`).
Every other pair — a hand-written task, or an instance of a held-out family (eval_ood) against any
training task of another family — is checked against the threshold as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from termagent.judge.task_context import TaskContext

# The verifier wrapper of the bundled tasks and the fixed parts of generated tests (kept in sync with
# termagent/tasks/families/base.py, whose text is added below).
_BUNDLED_TEST_SH = """#!/bin/bash
# Verifier: runs the checks and writes the reward Harbor reads.
mkdir -p /logs/verifier
cd /app 2>/dev/null || true
python3 -m pytest -q -rA -p no:cacheprovider /tests/test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

_TOKEN = re.compile(r"[a-z0-9_]+")


@dataclass
class ContaminationConfig:
    threshold: float = 0.5  # Jaccard >= this: a near-duplicate
    ngram: int = 3  # words per shingle


def shingles(text: str, n: int) -> frozenset[tuple[str, ...]]:
    words = _TOKEN.findall(text.lower())
    if len(words) < n:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


@cache
def boilerplate(n: int) -> frozenset[tuple[str, ...]]:
    from termagent.tasks.families.base import TEST_HEADER, TEST_SH, TEST_UNTOUCHED

    return shingles(_BUNDLED_TEST_SH, n) | shingles(TEST_SH, n) | shingles(TEST_HEADER + TEST_UNTOUCHED, n)


def task_shingles(task: TaskContext, n: int) -> frozenset[tuple[str, ...]]:
    return shingles(task_text(task), n) - boilerplate(n)


def family(task: TaskContext) -> str | None:
    value = (task.metadata or {}).get("family")
    return str(value) if value else None


def task_text(task: TaskContext) -> str:
    return f"{task.instruction}\n{task.tests_text}"


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


@dataclass
class ContaminationReport:
    threshold: float
    ngram: int
    n_train: int
    n_eval: int
    pairs: list[dict] = field(default_factory=list)  # {train_id, eval_id, similarity}, most similar first
    excluded_train_ids: list[str] = field(default_factory=list)
    # family -> {"n_pairs_over_threshold", "max_similarity", "n_eval"}: held-out instances vs their
    # training siblings (near-duplicates by design; nothing excluded)
    in_distribution: dict[str, dict] = field(default_factory=dict)
    # eval family -> {train family: highest similarity}, for families with no training instance (OOD)
    ood_max_similarity: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"threshold": self.threshold, "ngram": self.ngram, "n_train": self.n_train, "n_eval": self.n_eval,
                "n_pairs": len(self.pairs), "excluded_train_ids": self.excluded_train_ids, "pairs": self.pairs,
                "in_distribution": self.in_distribution, "ood_max_similarity": self.ood_max_similarity}


def find_contamination(train: list[TaskContext], eval_: list[TaskContext],
                       config: ContaminationConfig | None = None) -> ContaminationReport:
    cfg = config or ContaminationConfig()
    eval_sh = [(e.id, family(e), task_shingles(e, cfg.ngram)) for e in eval_]
    train_families = {family(t) for t in train} - {None}
    pairs = []
    in_dist: dict[str, dict] = {}
    ood: dict[str, dict[str, float]] = {}
    for t in train:
        sh, tfam = task_shingles(t, cfg.ngram), family(t)
        for eid, efam, esh in eval_sh:
            if t.id == eid:
                pairs.append({"train_id": t.id, "eval_id": eid, "similarity": 1.0})
                continue
            sim = jaccard(sh, esh)
            if tfam is not None and tfam == efam:  # a held-out sibling: near-duplicate by design
                entry = in_dist.setdefault(tfam, {"n_pairs_over_threshold": 0, "max_similarity": 0.0})
                entry["n_pairs_over_threshold"] += sim >= cfg.threshold
                entry["max_similarity"] = max(entry["max_similarity"], round(sim, 4))
                continue
            if efam is not None and efam not in train_families and tfam is not None:
                row = ood.setdefault(efam, {})
                row[tfam] = max(row.get(tfam, 0.0), round(sim, 4))
            if sim >= cfg.threshold:
                pairs.append({"train_id": t.id, "eval_id": eid, "similarity": round(sim, 4)})
    for fam, entry in in_dist.items():
        entry["n_eval"] = sum(1 for _, efam, _ in eval_sh if efam == fam)
    pairs.sort(key=lambda p: (-p["similarity"], p["train_id"], p["eval_id"]))
    return ContaminationReport(cfg.threshold, cfg.ngram, len(train), len(eval_), pairs,
                               sorted({p["train_id"] for p in pairs}), dict(sorted(in_dist.items())),
                               {f: dict(sorted(r.items())) for f, r in sorted(ood.items())})
