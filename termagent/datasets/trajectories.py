"""Datasets from sampled multi-turn trajectories (the sample stage's rollouts.jsonl).

- `rft_rows`: rejection-sampling fine-tuning: the verified passing trajectories (the tests passed and the agent
  declared the task complete), deduplicated, at most `per_task` per task, as SFT conversations.
- `turn_pairs`: preference pairs from a pass and a fail of the *same* task: both trajectories start from the same
  prompt, so they share a prefix (prompt, identical replies, identical observations); the pair is taken at the
  first turn where the model's replies part: prompt = the shared prefix, chosen = the passing reply, rejected =
  the failing one. A pair whose first difference is not a reply (the environment answered differently) is skipped
  and counted: its preference would not be about the model's choice.

Both read only train-task trajectories (the sample stage samples the train split only).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import product


def _key(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def rft_rows(records: Iterable[dict], per_task: int = 2) -> list[dict]:
    """Passing trajectories that ended on task_complete, distinct conversations, `per_task` at most per task."""
    seen: set[str] = set()
    taken: Counter = Counter()
    rows = []
    for r in sorted(records, key=lambda r: (r["task_id"], r["attempt"])):
        conv = r.get("conversation") or []
        if not r.get("passed") or r.get("ended_by") != "task_complete" or not conv:
            continue
        key = _key(conv)
        if key in seen or taken[r["task_id"]] >= per_task:
            continue
        seen.add(key)
        taken[r["task_id"]] += 1
        rows.append({"conversations": conv, "task_id": r["task_id"], "attempt": r["attempt"],
                     "reward": r["reward"], "n_turns": r.get("n_turns"), "source": "rft"})
    return rows


def divergent_pair(chosen: list[dict], rejected: list[dict]) -> tuple[dict | None, str]:
    """(row, "") at the first message where the two conversations part, or (None, why not)."""
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    if shared == len(chosen) or shared == len(rejected):
        return None, "no_divergence"
    if chosen[shared]["role"] != "assistant" or rejected[shared]["role"] != "assistant":
        return None, "environment_diverged"
    turn = sum(m["role"] == "assistant" for m in chosen[:shared])
    return {"prompt": chosen[:shared], "chosen": [chosen[shared]], "rejected": [rejected[shared]],
            "turn": turn}, ""


def turn_pairs(records: Iterable[dict], per_task: int = 4) -> tuple[list[dict], dict[str, int]]:
    """Pairs (pass, fail) of each task at their divergent turn, at most `per_task` distinct ones per task (the
    pass/fail combinations taken round-robin, so several passes and fails each appear); and the counts."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("reward") is not None and r.get("conversation"):
            by_task[r["task_id"]].append(r)
    counts: Counter = Counter()
    rows = []
    for task_id, rs in sorted(by_task.items()):
        rs.sort(key=lambda r: r["attempt"])
        passes = [r for r in rs if r["passed"]]
        fails = [r for r in rs if not r["passed"]]
        if not passes or not fails:
            continue
        counts["tasks_with_both"] += 1
        seen: set[str] = set()
        combos = sorted(product(range(len(passes)), range(len(fails))), key=lambda ij: (ij[0] + ij[1], ij[0]))
        for i, j in combos:
            if len(seen) >= per_task:
                break
            row, why = divergent_pair(passes[i]["conversation"], fails[j]["conversation"])
            if row is None:
                counts[why] += 1
                continue
            key = _key([*row["prompt"], *row["chosen"], *row["rejected"]])
            if key in seen:
                counts["duplicate"] += 1
                continue
            seen.add(key)
            rows.append({"task_id": task_id, **row, "attempt_chosen": passes[i]["attempt"],
                         "attempt_rejected": fails[j]["attempt"], "reward_chosen": passes[i]["reward"],
                         "reward_rejected": fails[j]["reward"], "source": "sampled"})
    counts["pairs"] = len(rows)
    return rows, dict(counts)


def write_sampled(sampled, out, rft_per_task: int, pairs_per_task: int) -> dict[str, int]:
    """out/rft_sft.jsonl and out/dpo_turns.jsonl from a sample stage's rollouts.jsonl; their counts (and what the
    pairing skipped) merged into out/summary.json, which the rollout datasets' build wrote."""
    from pathlib import Path

    from termagent import atomic
    from termagent.rollouts import iter_jsonl

    out = Path(out)
    records = list(iter_jsonl(sampled))
    rft = rft_rows(records, rft_per_task)
    pairs, pair_counts = turn_pairs(records, pairs_per_task)
    for name, rows in (("rft_sft.jsonl", rft), ("dpo_turns.jsonl", pairs)):
        atomic.write_text(out / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    counts = {"rft_sft.jsonl": len(rft), "dpo_turns.jsonl": len(pairs)}
    summary = json.loads((out / "summary.json").read_text())
    summary["counts"].update(counts)
    summary["sampled"] = {"rollouts": str(sampled), "trajectories": len(records),
                          "passing": sum(bool(r.get("passed")) for r in records), "turn_pairs": pair_counts}
    atomic.write_json(out / "summary.json", summary)
    return counts
