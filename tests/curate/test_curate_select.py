"""Curation: weights against hand-computed values, seeded sampling, filter/dedup/rebalance, contamination."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from termagent.curate import (
    ContaminationConfig,
    CurateConfig,
    TaskStats,
    WeightConfig,
    curate_tasks,
    curation_weight,
    find_contamination,
    task_stats,
    weighted_sample,
)
from termagent.judge import TaskAnalysis, TaskContext
from termagent.judge.fabrication import ProvidedPaths


def stats(n, mean_turns, rewards) -> TaskStats:
    s = TaskStats()
    for r in rewards:
        s.add(r, mean_turns)
    return s


def test_weight_matches_hand_computation():
    s = stats(4, 5, [0.0, 0.4, 0.8, 0.4])  # mean reward 0.4, std sqrt(0.08)
    assert s.mean_reward == pytest.approx(0.4) and s.reward_std == pytest.approx(math.sqrt(0.08))
    peak_turns = 1 / (2 * math.sqrt(2 * math.pi))  # Normal(5; 5, 2)
    peak_reward = 1 / (0.25 * math.sqrt(2 * math.pi))  # Normal(0.4; 0.4, 0.25)
    cfg = WeightConfig(reward_mu=0.4, reward_sigma=0.25)
    assert curation_weight(s, cfg) == pytest.approx(peak_turns * peak_reward * (math.sqrt(0.08) + 0.05))
    # one sigma away on both normals, zero variance: e^-0.5 each, times the 0.05 floor
    flat = stats(2, 3, [0.65, 0.65])
    assert curation_weight(flat, cfg) == pytest.approx(peak_turns * math.exp(-0.5) * peak_reward * math.exp(-0.5) * 0.05)


def test_task_stats_from_rollouts_single_and_multi_turn(tmp_path):
    rows = [
        {"task_id": "a", "training_step": 0, "completion": "", "reward": 1.0},
        {"task_id": "a", "training_step": 0, "completion": "", "reward": 0.0},
        {"task_id": "b", "training_step": 0, "completion": "", "reward": 0.5,
         "turn_info": [{"exec_rc": 0}] * 4},
        {"task_id": "b", "training_step": 1, "completion": "", "reward": 0.5,
         "turn_info": [{"exec_rc": 0}] * 6},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{torn")
    st = task_stats(path)
    assert (st["a"].n, st["a"].mean_turns, st["a"].mean_reward, st["a"].reward_std) == (2, 1.0, 0.5, 0.5)
    assert (st["b"].mean_turns, st["b"].reward_std) == (5.0, 0.0)


def test_weighted_sample_is_seeded_without_replacement_and_follows_weights():
    weights = {"heavy": 8.0, "mid": 1.0, "light": 0.25, "zero": 0.0}
    assert weighted_sample(weights, 4, seed=1) == weighted_sample(weights, 4, seed=1)
    assert sorted(weighted_sample(weights, 4, seed=1)) == sorted(weights)
    firsts = Counter(weighted_sample(weights, 1, seed=s)[0] for s in range(2000))
    assert firsts["zero"] == 0
    assert firsts["heavy"] / 2000 == pytest.approx(8 / 9.25, abs=0.04)  # first draw: proportional to weight
    assert weighted_sample(weights, 4, seed=3)[-1] == "zero"


class FixedAnalysisJudge:
    """Answers task analysis from a table: isolates the selection logic from any judge's opinion."""

    name, prompt_version, label = "fixed", "1", "fixed/1"

    def __init__(self, table: dict[str, tuple[int, str, list[str], str]]):
        self.table = table

    def analyze_tasks(self, tasks):
        return [TaskAnalysis(t.id, *self.table[t.id], reason="table", judge=self.label) for t in tasks]


def ctx(tid: str, instruction: str | None = None) -> TaskContext:
    return TaskContext(tid, instruction or f"unique instruction number {tid} " + " ".join(tid * 5), "", "", {},
                       "/app", ProvidedPaths.of([]))


def test_filter_dedup_and_rebalance():
    table = {
        "a": (9, "medium", ["file_ops"], "sig a a a a"),
        "b": (9, "hard", ["file_ops"], "sig b b b b"),
        "c": (6, "hard", ["git"], "sig c c c c"),  # quality 6: dropped
        "d": (9, "easy", ["git"], "sig d d d d"),  # easy: dropped
        "e": (9, "medium", ["file_ops"], "sig a a a a"),  # duplicate signature of a
        "f": (8, "medium", ["networking"], "sig f f f f"),  # rare skill
        "g": (8, "medium", ["file_ops", "python"], "sig g g g g"),
    }
    tasks = {t: ctx(t) for t in table}
    st = {t: stats(4, 5, [0.2, 0.6, 0.4, 0.4]) for t in table}
    st["a"] = stats(4, 5, [0.0, 1.0, 0.0, 1.0])  # higher std: heavier than e
    judge = FixedAnalysisJudge(table)

    everything = curate_tasks(tasks, set(), st, judge, CurateConfig(drop_difficulties=["easy"]))  # target 0: all
    chosen = set(everything.selected_ids)
    assert chosen - {"a", "e"} == {"b", "f", "g"} and len(chosen & {"a", "e"}) == 1  # one of the duplicates
    dup = ({"a", "e"} - chosen).pop()
    assert everything.decisions[dup] == f"dropped:duplicate signature of {({'a', 'e'} - {dup}).pop()}"
    assert everything.decisions["c"].startswith("dropped:quality 6")
    assert everything.decisions["d"] == "dropped:difficulty easy"

    # target 3 from a sample that happens to hold only file_ops tasks: rebalance brings the rare skill
    seed = next(s for s in range(500) if set(weighted_sample(everything.weights, 3, s)) <= {"a", "b", "c", "d", "e"})
    small = curate_tasks(tasks, set(), st, judge, CurateConfig(target_size=3, seed=seed, drop_difficulties=["easy"]))
    assert len(small.selected) == 3
    rebalanced = [s["id"] for s in small.selected if s["selected_by"] == "rebalance"]
    assert rebalanced and rebalanced[0] == "f"  # networking is unrepresented: rarest first
    assert small.skills_after["networking"] == 1 and sum(small.skills_before.values()) >= 7
    assert small.judge == "fixed/1"


def test_contamination_guard_flags_planted_near_duplicates_and_curation_skips_them():
    base = ("Parse the access log at /app/logs/access.log and write the number of requests per client "
            "IP address to /app/report.txt, one 'IP COUNT' line per client, sorted by count descending, "
            "ties broken by IP ascending. Lines that do not parse are skipped.")
    tasks = {
        "eval-log": ctx("eval-log", base),
        "train-copy": ctx("train-copy", base.replace("/app/report.txt", "/app/counts.txt")),  # planted
        "train-reworded": ctx("train-reworded", base.replace("descending", "from high to low")),  # planted
        "train-other": ctx("train-other", "Create a git tag v1.2.0 on the commit that bumped the version in "
                                          "setup.cfg, annotated with the message 'release 1.2.0'."),
    }
    report = find_contamination([tasks[t] for t in tasks if t.startswith("train")], [tasks["eval-log"]],
                                ContaminationConfig(threshold=0.5))
    assert report.excluded_train_ids == ["train-copy", "train-reworded"]
    assert all(p["eval_id"] == "eval-log" and p["similarity"] >= 0.5 for p in report.pairs)
    assert report.to_dict()["n_pairs"] == 2

    table = {t: (9, "medium", ["text_processing"], f"sig {t} x y z") for t in tasks}
    st = {t: stats(2, 5, [0.0, 1.0]) for t in tasks}
    result = curate_tasks(tasks, {"eval-log"}, st, FixedAnalysisJudge(table), CurateConfig())
    assert result.selected_ids == ["train-other"]
    assert result.decisions["train-copy"].startswith("dropped:near-duplicate of eval task eval-log")
    assert result.decisions["eval-log"] == "eval"
    assert result.contamination["excluded_train_ids"] == ["train-copy", "train-reworded"]


def test_tasks_sft_and_dpo_trained_on_are_left_out(tmp_path, monkeypatch):
    """SFT's manifest names the conversations it trained on (`trained_examples`): only those rows' tasks count;
    DPO's lists none: every row of its datasets counts; a stage that passed its input through trained on nothing."""
    from termagent.curate.select import tasks_trained_by
    from termagent.train.sft import conversation_key

    monkeypatch.chdir(tmp_path)  # manifests name their datasets relative to the repository root
    conv = lambda t: [{"role": "user", "content": f"do {t}"}, {"role": "assistant", "content": "ok"}]
    Path("data").mkdir()
    Path("data/sft.jsonl").write_text("".join(json.dumps({"conversations": conv(t), "task_id": t}) + "\n"
                                              for t in ("a", "b")))
    Path("data/dpo.jsonl").write_text(json.dumps({"prompt": "p", "chosen": "x", "rejected": "y", "task_id": "c"}) + "\n")
    for name, manifest in {"sft": {"stage": "sft", "params": {"datasets": ["data/sft.jsonl"]},
                                   "trained_examples": [conversation_key(conv("a"))]},
                           "dpo": {"stage": "dpo", "params": {"datasets": ["data/dpo.jsonl"]}},
                           "dpo_skipped": {"stage": "dpo", "skipped": "empty input"}}.items():
        Path(name).mkdir()
        Path(name, "manifest.json").write_text(json.dumps(manifest))
    trained = tasks_trained_by(["sft", "dpo", "dpo_skipped"])
    assert trained == {"a": "sft", "c": "dpo"}  # b: in SFT's dataset, not among the rows it trained on

    table = {t: (9, "medium", ["file_ops"], f"sig {t} {t} {t} {t}") for t in "abcd"}
    st = {t: stats(4, 5, [0.0, 1.0, 0.0, 1.0]) for t in table}
    result = curate_tasks({t: ctx(t) for t in table}, set(), st, FixedAnalysisJudge(table), CurateConfig(),
                          trained=trained)
    assert set(result.selected_ids) == {"b", "d"}
    assert result.decisions["a"] == "dropped:trained on by sft" and result.decisions["c"] == "dropped:trained on by dpo"
    Path("broken").mkdir()
    with pytest.raises(ValueError, match="manifest"):
        tasks_trained_by(["broken"])
    warnings = []
    assert tasks_trained_by(["nowhere"], warnings) == {} and "nowhere does not exist" in warnings[0]
