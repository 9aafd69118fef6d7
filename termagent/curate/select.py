"""Curate the multi-turn RL task list (docs/design.md#curation), in this order:

1. candidates: training tasks (never an eval task) that have rollout statistics, and that no earlier stage named
   in `exclude_trained_by` (SFT, DPO) trained on: MT-GRPO would re-measure what they just learned (issue 41);
2. contamination guard: drop candidates that near-duplicate an eval task;
3. weighted sample without replacement of `target_size` candidates (weights.py, seeded);
4. four-dimension analysis of every training task by the judge;
5. filter the sample: drop quality <= 6 (< min_quality), difficulty in drop_difficulties, and a
   signature already taken (the earlier draw keeps it);
6. rebalance: refill to target_size from the remaining eligible pool, each time taking the task
   whose rarest skill is least represented so far (ties: higher weight, then id).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from termagent.curate.contamination import ContaminationConfig, find_contamination
from termagent.curate.weights import TaskStats, WeightConfig, weighted_sample, weights_for
from termagent.judge.base import SKILLS, Judge, TaskAnalysis
from termagent.judge.task_context import TaskContext

log = logging.getLogger(__name__)


@dataclass
class CurateConfig:
    target_size: int = 0  # tasks to select; 0 = every eligible task (embedded default; H100: 100)
    min_quality: int = 7  # keep quality >= this: quality <= 6 is dropped
    drop_difficulties: list[str] = field(default_factory=list)  # the measured rates decide, not the label
    seed: int = 0
    weights: WeightConfig = field(default_factory=WeightConfig)
    contamination: ContaminationConfig = field(default_factory=ContaminationConfig)
    # with measured solve rates: keep tasks whose rate lies strictly between these (a task never or always
    # solved gives every group one outcome: no advantage for multi-turn RL)
    min_rate: float = 0.0
    max_rate: float = 1.0
    # adapter directories (models/sft, models/dpo) whose training tasks are left out: the task ids of the dataset
    # rows their manifest says they trained on (`trained_examples`; every row of its datasets when it lists none)
    exclude_trained_by: list[str] = field(default_factory=lambda: ["models/sft", "models/dpo"])
    # datasets whose rows exclude nothing: the oracle demos cover every train task (the warmup's full epoch, SFT's
    # second), so only what SFT/DPO learned from the policy's own episodes (passes, pairs) takes a task out
    exclude_ignores: list[str] = field(default_factory=lambda: ["data/sft/demos.jsonl"])


@dataclass
class CurationResult:
    selected: list[dict]  # {id, weight, selected_by, skills, quality, difficulty}, in selection order
    analysis: dict[str, TaskAnalysis]
    decisions: dict[str, str]  # task id -> "selected:sample" | "selected:rebalance" | why it was dropped
    weights: dict[str, float]
    stats: dict[str, TaskStats]
    contamination: dict
    skills_before: dict[str, int]
    skills_after: dict[str, int]
    judge: str
    config: dict

    @property
    def selected_ids(self) -> list[str]:
        return [s["id"] for s in self.selected]


def _passes(a: TaskAnalysis, cfg: CurateConfig) -> str | None:
    """None if the analysis passes the filter, else the reason it does not."""
    if a.quality < cfg.min_quality:
        return f"dropped:quality {a.quality} < {cfg.min_quality}"
    if a.difficulty in cfg.drop_difficulties:
        return f"dropped:difficulty {a.difficulty}"
    return None


def curate_tasks(tasks: dict[str, TaskContext], eval_ids: set[str], stats: dict[str, TaskStats], judge: Judge,
                 config: CurateConfig | None = None, *, measured: bool = False,
                 trained: dict[str, str] | None = None) -> CurationResult:
    """`measured`: `stats` are solve rates (rate_stats): a task outside (min_rate, max_rate) is dropped.
    `trained`: task id -> the stage that already trained on it (`tasks_trained_by`): dropped."""
    trained = trained or {}
    cfg = config or CurateConfig()
    train = [tasks[t] for t in sorted(tasks) if t not in eval_ids]
    evals = [tasks[t] for t in sorted(tasks) if t in eval_ids]
    decisions: dict[str, str] = {}

    report = find_contamination(train, evals, cfg.contamination)
    contaminated = set(report.excluded_train_ids)
    for tid in sorted(tasks):
        if tid in eval_ids:
            decisions[tid] = "eval"
        elif tid in contaminated:
            match = next(p for p in report.pairs if p["train_id"] == tid)
            decisions[tid] = f"dropped:near-duplicate of eval task {match['eval_id']} ({match['similarity']:.2f})"
        elif tid in trained:
            decisions[tid] = f"dropped:trained on by {trained[tid]}"
        elif tid not in stats:
            decisions[tid] = "dropped:not sampled" if measured else "dropped:no rollouts"
        elif measured and not cfg.min_rate < stats[tid].mean_reward < cfg.max_rate:
            st = stats[tid]
            decisions[tid] = (f"dropped:solve rate {round(st.mean_reward * st.n)}/{st.n} outside "
                              f"({cfg.min_rate}, {cfg.max_rate})")
    candidates = [t.id for t in train if t.id not in decisions]
    weights = weights_for(stats, candidates, cfg.weights)

    analyses = {a.task_id: a for a in judge.analyze_tasks(train)}
    target = cfg.target_size or len(candidates)
    sampled = weighted_sample(weights, min(target, len(candidates)), cfg.seed)

    selected: list[dict] = []
    taken_signatures: dict[str, str] = {}
    skill_counts: Counter = Counter()

    def take(tid: str, how: str) -> None:
        a = analyses[tid]
        selected.append({"id": tid, "weight": weights[tid], "selected_by": how, "skills": a.skills,
                         "quality": a.quality, "difficulty": a.difficulty})
        taken_signatures[a.signature] = tid
        skill_counts.update(a.skills)
        decisions[tid] = f"selected:{how}"

    def check(tid: str) -> str | None:
        a = analyses[tid]
        why = _passes(a, cfg)
        if why is None and a.signature in taken_signatures:
            why = f"dropped:duplicate signature of {taken_signatures[a.signature]}"
        return why

    for tid in sampled:
        why = check(tid)
        if why:
            decisions[tid] = why
        else:
            take(tid, "sample")

    in_sample = set(sampled)
    pool = [tid for tid in candidates if tid not in in_sample]
    while len(selected) < target and pool:
        eligible = []
        for tid in pool:
            why = check(tid)
            if why:
                decisions[tid] = why
            else:
                eligible.append(tid)
        if not eligible:
            break
        # the task whose rarest skill is least represented so far
        best = min(eligible, key=lambda t: (min(skill_counts[s] for s in analyses[t].skills), -weights[t], t))
        take(best, "rebalance")
        pool = [t for t in eligible if t != best]
    for tid in pool:
        decisions.setdefault(tid, "not selected:target size reached")

    before = Counter(s for t in train if t.id in analyses for s in analyses[t.id].skills)
    after = Counter(s for sel in selected for s in sel["skills"])
    return CurationResult(
        selected=selected, analysis=analyses, decisions=dict(sorted(decisions.items())), weights=weights,
        stats=stats, contamination=report.to_dict(),
        skills_before={s: before.get(s, 0) for s in SKILLS}, skills_after={s: after.get(s, 0) for s in SKILLS},
        judge=judge.label, config=asdict(cfg),
    )


def tasks_trained_by(adapter_dirs: list[str | Path], warnings: list[str] | None = None,
                     ignore: list[str | Path] = ()) -> dict[str, str]:
    """task id -> the stage that trained on it, from each adapter's manifest.json: the rows of the datasets its
    `params.datasets` names whose conversation is in its `trained_examples` (SFT records them), or every row of
    them when the manifest lists none (DPO trains on its pairs); a stage that passed its input through untrained
    (`skipped`) trained on nothing. Rows are attributed by their `task_id`. A directory that does not exist (curate
    run outside the pipeline, whose stage lists them as deps) excludes nothing: said in `warnings`. The datasets in
    `ignore` (the oracle demos) exclude nothing."""
    from termagent.train.sft import conversation_key, to_conversation

    out: dict[str, str] = {}
    ignored = {Path(p) for p in ignore}
    for adapter in adapter_dirs:
        if not Path(adapter).exists():
            if warnings is not None:
                warnings.append(f"curate.exclude_trained_by: {adapter} does not exist; no task excluded for it")
            continue
        path = Path(adapter) / "manifest.json"
        try:
            manifest = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the manifest of a stage curate.exclude_trained_by names: {exc}"
                             ) from None
        if manifest.get("skipped"):
            continue
        stage = manifest.get("stage", str(adapter))
        keys = set(manifest["trained_examples"]) if "trained_examples" in manifest else None
        sources = (manifest.get("params") or {}).get("datasets")
        if not isinstance(sources, list):
            raise ValueError(f"{path}: no params.datasets: which tasks the stage trained on is unknown")  # noqa: TRY004 (bad file)
        for source in sources:
            if not Path(source).is_file() or Path(source) in ignored:
                continue  # a Hub dataset (no task of ours), or one that covers every task (the oracle demos)
            for i, line in enumerate(Path(source).read_text().splitlines()):
                if not line.strip():
                    continue
                row = json.loads(line)
                task_id = row.get("task_id")
                if task_id is None:
                    continue
                if keys is None or conversation_key(to_conversation(row, f"{source}[{i}]")) in keys:
                    out.setdefault(task_id, stage)
    return out


def read_eval_ids(index_path: str | Path) -> set[str]:
    """Eval task ids from a task index (data/tasks.json: {"tasks": [{id, split, ...}]} or a list)."""
    path = Path(index_path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the task index: {exc}") from None
    records = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a list of task records under 'tasks'")  # noqa: TRY004 (bad file)
    out = set()
    for i, r in enumerate(records):
        if not isinstance(r, dict) or "id" not in r or "split" not in r:
            raise ValueError(f"{path}: tasks[{i}] needs 'id' and 'split'")
        if r["split"] != "train":  # every held-out group: eval, eval_id, eval_ood
            out.add(r["id"])
    return out
