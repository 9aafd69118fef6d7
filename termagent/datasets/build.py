"""Build the six training datasets from rollouts.jsonl in one streaming pass.

Memory holds only per-task and per-group state, never the whole input:
- sft:          per task, the best passing rollout so far (latest training_step, then highest
                step_reward_std; the first seen wins a full tie);
- api_sft:      per task, the `api_max_candidates` latest passing rollouts and a count;
- dpo:          groups keyed by (training_step, task_id), each holding at most `pairs_per_group`
                best passing and worst failing rollouts. GRPO writes a step's rollouts together, so a
                group is complete once a later training_step appears: groups are emitted then and
                forgotten. Rows whose step was already emitted (an out-of-order file) are detected;
                the dpo files are then rebuilt by a second pass that keeps every group until the end
                (correct, more memory, and reported as `dpo_out_of_order` in the summary);
- prm:          a heap of the `prm_pairs` kept pairs with the highest step_reward_std.

Pairs per group: passing rollouts sorted best-first (reward, then input order), failing ones
worst-first; candidate pairs (i, j) are taken in order of i + j, then i: (0,0), (0,1), (1,0), ...
so pairs_per_group=1 gives (best, worst) and 2 adds (best, second worst).
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.datasets.completion import parse_completion
from termagent.judge.base import Candidate, FabricationQuery, Judge, RankQuery, StepQuery
from termagent.judge.task_context import TaskContext
from termagent.rollouts import AtomicJsonlWriter, ReadStats, iter_rollouts

log = logging.getLogger(__name__)

OUTPUT_FILES = ("sft.jsonl", "dpo.jsonl", "dpo_filtered.jsonl", "api_sft.jsonl",
                "prm_sequence.jsonl", "prm_step.jsonl")
REMOVED_FILE = "dpo_filtered.removed.jsonl"


@dataclass
class BuildConfig:
    pass_threshold: float = 0.9  # verifier_reward >= this: a passing rollout
    fail_threshold: float = 0.6  # verifier_reward < this: a failing rollout (for dpo)
    pairs_per_group: int = 1  # dpo pairs per (training_step, task_id) group
    api_max_candidates: int = 3  # passing rollouts the judge compares per task (latest steps first)
    api_min_passing: int = 2  # a task needs this many passing rollouts for api_sft
    prm_pairs: int = 50  # N: kept dpo pairs with the highest step_reward_std that get step scores
    judge_batch: int = 64  # queries handed to the judge at once (its concurrency works within one batch)
    source: str = "grpo"  # recorded in sft/api_sft `source`
    rft_per_task: int = 2  # sampled trajectories: passing ones per task in rft_sft.jsonl (distinct conversations)
    turn_pairs_per_task: int = 4  # sampled trajectories: (pass, fail) pairs per task in dpo_turns.jsonl


@dataclass
class BuildSummary:
    counts: dict[str, int] = field(default_factory=dict)
    input: dict[str, Any] = field(default_factory=dict)
    removed_reasons: dict[str, int] = field(default_factory=dict)
    judge: str = ""
    judge_stats: dict[str, Any] = field(default_factory=dict)
    unknown_tasks: list[str] = field(default_factory=list)
    dpo_out_of_order: bool = False
    warnings: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def _candidate(r: dict) -> Candidate:
    parsed = r.get("_parsed") or parse_completion(r["completion"])
    return Candidate(r["completion"], parsed.commands, parsed.valid_json, r.get("exec_rc"),
                     r["verifier_reward"], r["training_step"])


def _with_parse(r: dict) -> dict:
    if "_parsed" not in r:
        r["_parsed"] = parse_completion(r["completion"])
    return r


def sft_record(r: dict, source: str) -> dict:
    return {
        "task_id": r["task_id"], "training_step": r["training_step"], "prompt": r["prompt"],
        "completion": r["completion"], "verifier_reward": r["verifier_reward"],
        "step_reward_std": r["step_reward_std"], "step_frac_zero_std": r["step_frac_zero_std"],
        "source": source,
        # the conversation in the OpenThoughts-Agent SFT shape, so the sft stage reads demos and this alike
        "messages": [*r["prompt"], {"role": "assistant", "content": r["completion"]}],
    }


# ------------------------------------------------------------------------------------------ dpo
class _Group:
    __slots__ = ("failing", "passing")

    def __init__(self) -> None:
        self.passing: list[tuple[float, int, dict]] = []  # (-reward, seq, record): best first
        self.failing: list[tuple[float, int, dict]] = []  # (reward, seq, record): worst first


class DpoGrouper:
    """Collects (training_step, task_id) groups and turns complete ones into pairs."""

    def __init__(self, config: BuildConfig, flush_on_advance: bool):
        self.config = config
        self.flush_on_advance = flush_on_advance
        self.groups: dict[tuple[int, str], _Group] = {}
        self.max_step: int | None = None
        self.flushed_steps: set[int] = set()
        self.out_of_order = False
        self._seq = 0

    def add(self, r: dict) -> list[dict]:
        """Add one rollout; returns the pairs of groups this row completes."""
        step, k = r["training_step"], self.config.pairs_per_group
        pairs: list[dict] = []
        if self.flush_on_advance:
            if step in self.flushed_steps:
                self.out_of_order = True
            if self.max_step is not None and step > self.max_step:
                pairs = self.flush(below=step)
            self.max_step = step if self.max_step is None else max(self.max_step, step)
        v = r["verifier_reward"]
        if v >= self.config.pass_threshold:
            g = self.groups.setdefault((step, r["task_id"]), _Group())
            _keep_k(g.passing, (-r["reward"], self._seq, r), k)
        elif v < self.config.fail_threshold:
            g = self.groups.setdefault((step, r["task_id"]), _Group())
            _keep_k(g.failing, (r["reward"], self._seq, r), k)
        self._seq += 1
        return pairs

    def flush(self, below: int | None = None) -> list[dict]:
        done = [key for key in self.groups if below is None or key[0] < below]
        pairs = []
        for key in sorted(done):
            pairs += self._pairs(self.groups.pop(key))
            self.flushed_steps.add(key[0])
        return pairs

    def _pairs(self, g: _Group) -> list[dict]:
        if not g.passing or not g.failing:
            return []
        p, f = sorted(g.passing), sorted(g.failing)
        order = sorted(((i, j) for i in range(len(p)) for j in range(len(f))), key=lambda ij: (sum(ij), ij[0]))
        return [dpo_record(p[i][2], f[j][2]) for i, j in order[: self.config.pairs_per_group]]


def _keep_k(items: list, item: tuple, k: int) -> None:
    """Keep the k smallest items (by key) of a stream in a tiny sorted list."""
    items.append(item)
    items.sort(key=lambda t: (t[0], t[1]))
    del items[k:]


def dpo_record(chosen: dict, rejected: dict) -> dict:
    return {
        "task_id": chosen["task_id"], "training_step": chosen["training_step"], "prompt": chosen["prompt"],
        "chosen": chosen["completion"], "rejected": rejected["completion"],
        "reward_chosen": chosen["reward"], "reward_rejected": rejected["reward"],
        "verifier_reward_chosen": chosen["verifier_reward"],
        "verifier_reward_rejected": rejected["verifier_reward"],
        "exec_rc_chosen": chosen.get("exec_rc"), "exec_rc_rejected": rejected.get("exec_rc"),
        "step_reward_std": chosen["step_reward_std"],
    }


# ------------------------------------------------------------------------------------------ builder
class DatasetBuilder:
    def __init__(self, config: BuildConfig, judge: Judge, tasks: dict[str, TaskContext]):
        self.config = config
        self.judge = judge
        self.tasks = tasks
        self.unknown_tasks: set[str] = set()

    def task(self, task_id: str) -> TaskContext:
        ctx = self.tasks.get(task_id)
        if ctx is None:
            self.unknown_tasks.add(task_id)
            return TaskContext.empty(task_id)
        return ctx

    # -- dpo filtering, in judge-sized batches
    def _filter_batch(self, pairs: list[dict], kept_w: AtomicJsonlWriter, removed_w: AtomicJsonlWriter,
                      reasons: dict[str, int], prm_heap: list, seq: list[int]) -> None:
        to_judge: list[tuple[dict, Candidate]] = []
        for pair in pairs:
            chosen = parse_completion(pair["chosen"])
            rejected = parse_completion(pair["rejected"])
            if not chosen.valid_json:
                self._remove(pair, "chosen_invalid_json", "chosen is not a valid Terminus JSON response",
                             removed_w, reasons)
            elif not rejected.valid_json:
                self._remove(pair, "rejected_invalid_json", "rejected is not a valid Terminus JSON response",
                             removed_w, reasons)
            else:
                cand = Candidate(pair["chosen"], chosen.commands, True, pair.get("exec_rc_chosen"),
                                 pair["verifier_reward_chosen"], pair["training_step"])
                to_judge.append((pair, cand))
        verdicts = self.judge.check_fabrication(
            [FabricationQuery(self.task(p["task_id"]), c) for p, c in to_judge]) if to_judge else []
        for (pair, _), verdict in zip(to_judge, verdicts):
            if verdict.fabricates:
                self._remove(pair, "chosen_fabricates", verdict.reason, removed_w, reasons, verdict.judge,
                             verdict.paths)
                continue
            kept_w.write(pair)
            seq[0] += 1
            # prm candidates: highest step_reward_std, then later step, then earlier in the file
            key = (pair["step_reward_std"], pair["training_step"], -seq[0])
            if len(prm_heap) < self.config.prm_pairs:
                heapq.heappush(prm_heap, (key, pair))
            elif self.config.prm_pairs > 0 and key > prm_heap[0][0]:
                heapq.heapreplace(prm_heap, (key, pair))

    @staticmethod
    def _remove(pair: dict, code: str, detail: str, removed_w: AtomicJsonlWriter, reasons: dict[str, int],
                judge: str = "", paths: list[str] | None = None) -> None:
        reasons[code] = reasons.get(code, 0) + 1
        removed_w.write({**pair, "removed_reason": code, "removed_detail": detail, "judge": judge,
                         "fabricated_paths": paths or []})

    def _run_dpo(self, rollouts: Path, out_dir: Path, flush_on_advance: bool, on_row=None,
                 stats: ReadStats | None = None):
        grouper = DpoGrouper(self.config, flush_on_advance)
        reasons: dict[str, int] = {}
        prm_heap: list = []
        seq = [0]
        pending: list[dict] = []
        with AtomicJsonlWriter(out_dir / "dpo.jsonl") as dpo_w, \
                AtomicJsonlWriter(out_dir / "dpo_filtered.jsonl") as kept_w, \
                AtomicJsonlWriter(out_dir / REMOVED_FILE) as removed_w:
            def emit(pairs: list[dict], final: bool = False) -> None:
                for p in pairs:
                    dpo_w.write(p)
                pending.extend(pairs)
                if pending and (final or len(pending) >= self.config.judge_batch):
                    self._filter_batch(pending, kept_w, removed_w, reasons, prm_heap, seq)
                    pending.clear()

            for r in iter_rollouts(rollouts, stats):
                if on_row is not None:
                    on_row(r)
                emit(grouper.add(r))
            emit(grouper.flush(), final=True)
            counts = {"dpo.jsonl": dpo_w.count, "dpo_filtered.jsonl": kept_w.count, REMOVED_FILE: removed_w.count}
        return grouper.out_of_order, reasons, prm_heap, counts

    # -- the whole build
    def build(self, rollouts: str | Path, out_dir: str | Path, progress: bool = True) -> BuildSummary:
        t0 = time.perf_counter()
        rollouts, out_dir = Path(rollouts), Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        stats = ReadStats(str(rollouts))
        sft_best: dict[str, tuple[tuple, dict]] = {}
        api_cands: dict[str, list[tuple[tuple, dict]]] = {}
        api_passing: dict[str, int] = {}
        seq = [0]

        def on_row(r: dict) -> None:
            seq[0] += 1
            if r["verifier_reward"] < cfg.pass_threshold:
                return
            tid = r["task_id"]
            key = (r["training_step"], r["step_reward_std"])
            best = sft_best.get(tid)
            if best is None or key > best[0]:
                sft_best[tid] = (key, r)
            api_passing[tid] = api_passing.get(tid, 0) + 1
            # latest steps first; within a step the higher-std, then earlier, row
            _keep_k(api_cands.setdefault(tid, []), ((-r["training_step"], -r["step_reward_std"]), seq[0], r),
                    cfg.api_max_candidates)

        bar = _progress(progress, rollouts)
        try:
            out_of_order, reasons, prm_heap, counts = self._run_dpo(
                rollouts, out_dir, True, on_row=lambda r: (on_row(r), bar.update(1)), stats=stats)
        finally:
            bar.close()
        if out_of_order:
            log.warning("%s: training_step rows are not contiguous; rebuilding dpo with every group in memory",
                        rollouts)
            _, reasons, prm_heap, counts = self._run_dpo(rollouts, out_dir, False)

        with AtomicJsonlWriter(out_dir / "sft.jsonl") as w:
            for tid in sorted(sft_best):
                w.write(sft_record(sft_best[tid][1], cfg.source))
            counts["sft.jsonl"] = w.count

        api_tasks = sorted(t for t, n in api_passing.items() if n >= cfg.api_min_passing)
        with AtomicJsonlWriter(out_dir / "api_sft.jsonl") as w:
            for start in range(0, len(api_tasks), cfg.judge_batch):
                batch = api_tasks[start:start + cfg.judge_batch]
                cands = [[_with_parse(item[2]) for item in api_cands[t]] for t in batch]
                rankings = self.judge.rank([RankQuery(self.task(t), tuple(_candidate(r) for r in rs))
                                            for t, rs in zip(batch, cands)])
                for t, rs, ranking in zip(batch, cands, rankings):
                    best = rs[ranking.best]
                    w.write({**sft_record(best, cfg.source), "api_reason": ranking.reason,
                             "n_candidates_compared": len(rs), "judge": ranking.judge})
            counts["api_sft.jsonl"] = w.count

        prm_pairs = [pair for _, pair in sorted(prm_heap, key=lambda kp: kp[0], reverse=True)]
        with AtomicJsonlWriter(out_dir / "prm_sequence.jsonl") as seq_w, \
                AtomicJsonlWriter(out_dir / "prm_step.jsonl") as step_w:
            for start in range(0, len(prm_pairs), cfg.judge_batch):
                batch = prm_pairs[start:start + cfg.judge_batch]
                queries = [StepQuery(self.task(p["task_id"]), self._pair_candidate(p, "chosen"),
                                     self._pair_candidate(p, "rejected")) for p in batch]
                for pair, q, s in zip(batch, queries, self.judge.score_steps(queries)):
                    self._write_prm(pair, q, s, seq_w, step_w)
            counts["prm_sequence.jsonl"], counts["prm_step.jsonl"] = seq_w.count, step_w.count

        summary = BuildSummary(
            counts={name: counts.get(name, 0) for name in (*OUTPUT_FILES, REMOVED_FILE)},
            input=stats.to_dict(), removed_reasons=dict(sorted(reasons.items())), judge=self.judge.label,
            judge_stats=self.judge.stats() if hasattr(self.judge, "stats") else {},
            unknown_tasks=sorted(self.unknown_tasks), dpo_out_of_order=out_of_order, config=asdict(cfg),
        )
        if stats.n_records == 0:
            summary.warnings.append(f"{rollouts}: no valid rollouts; all datasets are empty")
        if stats.n_malformed:
            summary.warnings.append(f"{rollouts}: {stats.n_malformed} malformed line(s) skipped, first at line "
                                    f"{stats.malformed[0][0]}: {stats.malformed[0][1]}")
        if self.unknown_tasks:
            summary.warnings.append(f"{len(self.unknown_tasks)} task id(s) not found in the tasks dir; "
                                    "their completions were not checked for fabrication")
        for w in summary.warnings:
            log.warning(w)
        summary.wall_s = round(time.perf_counter() - t0, 3)
        atomic.write_json(out_dir / "summary.json", asdict(summary))
        return summary

    @staticmethod
    def _pair_candidate(pair: dict, side: str) -> Candidate:
        parsed = parse_completion(pair[side])
        return Candidate(pair[side], parsed.commands, parsed.valid_json, pair.get(f"exec_rc_{side}"),
                         pair[f"verifier_reward_{side}"], pair["training_step"])

    @staticmethod
    def _write_prm(pair: dict, q: StepQuery, s, seq_w: AtomicJsonlWriter, step_w: AtomicJsonlWriter) -> None:
        seq_w.write({
            "task_id": pair["task_id"], "training_step": pair["training_step"],
            "divergence_step": s.divergence_step, "divergence_reason": s.divergence_reason,
            "passing_scores": s.passing_scores, "failing_scores": s.failing_scores, "step_notes": s.step_notes,
            "passing_commands": list(q.passing.commands), "failing_commands": list(q.failing.commands),
            "step_reward_std": pair["step_reward_std"], "judge": s.judge,
        })
        for kind, cand, scores in (("passing", q.passing, s.passing_scores), ("failing", q.failing, s.failing_scores)):
            for i, (cmd, score) in enumerate(zip(cand.commands, scores)):
                step_w.write({
                    "task_id": pair["task_id"], "training_step": pair["training_step"], "sequence_type": kind,
                    "step_idx": i, "prefix_commands": list(cand.commands[:i]), "command": cmd,
                    "step_score": score, "is_divergence_step": i == s.divergence_step,
                    "final_verifier_reward": cand.verifier_reward,
                })


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(enabled: bool, path: Path):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(desc=f"rollouts {path.name}", unit=" rows", mininterval=0.5, leave=False)


def build_datasets(rollouts: str | Path, out_dir: str | Path, judge: Judge, tasks: dict[str, TaskContext],
                   config: BuildConfig | None = None, progress: bool = True) -> BuildSummary:
    """The six datasets + summary.json under `out_dir` (see OUTPUT_FILES)."""
    return DatasetBuilder(config or BuildConfig(), judge, tasks).build(rollouts, out_dir, progress=progress)
