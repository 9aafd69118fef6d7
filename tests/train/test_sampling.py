"""Measured solve rates (termagent/train/sampling.py) and the choices they drive: GRPO's and curate's tasks."""

from __future__ import annotations

import json

import pytest

from termagent.curate.select import CurateConfig, curate_tasks
from termagent.curate.weights import rate_stats
from termagent.judge.rules import RulesJudge
from termagent.rollouts import read_rates, tasks_with_signal
from termagent.train.sampling import (
    SampleParams,
    expansion_pool,
    sample_tasks,
    screened_episodes,
    solve_rates,
    summary_of,
)


def rec(task, attempt, reward):
    return {"task_id": task, "attempt": attempt, "reward": reward, "passed": reward is not None and reward >= 1.0,
            "ended_by": "task_complete", "n_turns": 3, "error": None, "conversation": []}


RECORDS = ([rec("always", i, 1.0) for i in range(4)] + [rec("never", i, 0.0) for i in range(4)]
           + [rec("half", 0, 1.0), rec("half", 1, 0.0), rec("half", 2, 1.0), rec("half", 3, 0.0)]
           + [rec("flaky_infra", 0, 1.0), rec("flaky_infra", 1, None), rec("flaky_infra", 2, 0.0)])


def test_rates_leave_infrastructure_failures_out_and_the_summary_counts_mixed_tasks():
    rates = solve_rates(RECORDS, {"always": "f1", "never": "f1", "half": "f2", "flaky_infra": "f2"})
    assert rates["half"]["rate"] == 0.5 and rates["always"]["rate"] == 1.0 and rates["never"]["rate"] == 0.0
    assert rates["flaky_infra"]["n"] == 2 and rates["flaky_infra"]["infra_failures"] == 1  # not the model's 0
    s = summary_of(rates)
    assert (s["tasks_mixed"], s["tasks_all_pass"], s["tasks_all_fail"], s["infra_failures"]) == (2, 1, 1, 1)
    assert s["pass_rate_by_family"] == {"f1": 0.5, "f2": 0.5}
    hand = summary_of(solve_rates(RECORDS, {"always": "f1", "never": "f1"}))  # "half", "flaky_infra": no family
    assert hand["pass_rate_by_family"] == {"f1": 0.5, "(hand-written)": 0.5}  # never the key "None"


def test_only_tasks_with_a_rate_strictly_inside_zero_one_carry_signal(tmp_path):
    path = tmp_path / "rates.json"
    path.write_text(json.dumps({"tasks": solve_rates(RECORDS, {})}))
    assert tasks_with_signal(path) == ["flaky_infra", "half"]
    assert tasks_with_signal(path, min_rate=0.5) == []
    (tmp_path / "bad.json").write_text(json.dumps({"tasks": {"x": {"rate": 1}}}))
    with pytest.raises(ValueError, match="bad.json.*needs n and passes"):
        read_rates(tmp_path / "bad.json")


class T:
    def __init__(self, id, family):
        self.id, self.metadata = id, {"family": family}


def test_the_screen_spends_the_remaining_attempts_only_where_a_screen_episode_passed():
    tasks = [T(f"t-{i}", "a") for i in range(4)]
    outcome = {("t-0", 0): 1.0, ("t-1", 1): 1.0}  # t-0 and t-1 pass once in the screen; t-2, t-3 never
    calls = []

    def run(ts, n):  # run_local_eval's shape: attempts numbered from 0
        calls.append(([t.id for t in ts], n))
        return [{"task_id": t.id, "attempt": a, "reward": outcome.get((t.id, a), 0.0)} for a in range(n) for t in ts], 1.0

    got, wall = screened_episodes(tasks, SampleParams(attempts=4, screen=2), run, log=lambda *_: None)
    assert calls == [(["t-0", "t-1", "t-2", "t-3"], 2), (["t-0", "t-1"], 2)] and wall == 2.0
    per_task = {t.id: sorted(r["attempt"] for r in got if r["task_id"] == t.id) for t in tasks}
    assert per_task == {"t-0": [0, 1, 2, 3], "t-1": [0, 1, 2, 3], "t-2": [0, 1], "t-3": [0, 1]}
    calls.clear()  # expand: t-0 passed, so up to 2 more tasks of its family "a" (never of "b") are screened
    pool = tasks + [T("a-9", "a"), T("b-9", "b"), T("a-8", "a"), T("a-7", "a")]
    outcome[("a-8", 0)] = 1.0
    got, _ = screened_episodes(tasks, SampleParams(attempts=4, screen=2, expand=2), run, log=lambda *_: None,
                               pool=pool, family_of=lambda t: t.metadata["family"])
    assert calls[2:] == [(["a-9", "a-8"], 2), (["a-8"], 2)]
    calls.clear()
    got, _ = screened_episodes(tasks, SampleParams(attempts=3, screen=0), run, log=lambda *_: None)
    assert calls == [(["t-0", "t-1", "t-2", "t-3"], 3)] and len(got) == 12  # screen 0: every attempt everywhere
    assert [t.id for t in expansion_pool(pool, {"a-9", "a-8"}, seed=0)] in (["a-9", "a-8"], ["a-8", "a-9"])
    assert [t.id for t in expansion_pool(pool, None, 3)] == [t.id for t in expansion_pool(pool, None, 3)]
    assert sorted(t.id for t in expansion_pool(pool, None, 3)) == sorted(t.id for t in pool)
    with pytest.raises(ValueError, match="sample.screen"):
        SampleParams(attempts=2, screen=3)


def test_sampling_reads_train_tasks_only_and_spreads_over_families():
    tasks = [T(f"{f}-{i}", f) for f in ("a", "b", "c") for i in range(4)]
    split = {t.id: "train" for t in tasks}
    picked = sample_tasks(tasks, split, SampleParams(max_tasks=3))
    assert sorted(t.metadata["family"] for t in picked) == ["a", "b", "c"]
    assert {t.id for t in sample_tasks(tasks, split, SampleParams(max_tasks=0), only={"a-1", "b-2"})} == {"a-1", "b-2"}
    split["c-0"] = "eval_id"
    with pytest.raises(ValueError, match="train tasks only"):
        sample_tasks(tasks, split, SampleParams())
    with pytest.raises(ValueError, match="attempts must be >= 2"):
        SampleParams(attempts=1)


def test_curate_with_measured_rates_keeps_easy_tasks_in_zero_one_and_weights_by_rate(tmp_path):
    from termagent.judge.task_context import ProvidedPaths, TaskContext

    ids = ["always", "half", "never", "quarter"]
    tasks = {t: TaskContext(t, f"Task {t}: write the word {t} into /app/{t}.txt and nothing else, then stop.",
                            f"def test_{t}():\n    assert open('/app/{t}.txt').read() == '{t}'\n",
                            f"echo {t} > /app/{t}.txt\n", {"difficulty": "easy", "family": t}, "/app",
                            ProvidedPaths.of([])) for t in ids}
    rates = {"always": {"n": 4, "passes": 4}, "half": {"n": 4, "passes": 2}, "never": {"n": 4, "passes": 0},
             "quarter": {"n": 4, "passes": 1}}
    result = curate_tasks(tasks, set(), rate_stats(rates), RulesJudge(), CurateConfig(min_quality=0), measured=True)
    assert sorted(result.selected_ids) == ["half", "quarter"]
    assert result.decisions["always"].startswith("dropped:solve rate 4/4")
    assert result.decisions["never"].startswith("dropped:solve rate 0/4")
    assert result.weights["half"] > result.weights["quarter"]  # a rate near one half weighs most


def test_grpo_repeats_its_prompts_until_one_step_fits():
    from termagent.train.grpo import fill_rows

    one = [{"prompt": "p", "task_id": "only-task"}]
    assert fill_rows(one, 2) == one * 2  # TRL's sampler yields no batch from 1 prompt when a step draws 2
    three = [{"task_id": str(i)} for i in range(3)]
    assert fill_rows(three, 2) == three and fill_rows([], 2) == []


def test_mt_grpo_samples_the_unseen_tasks_of_the_families_the_warmup_solved():
    from types import SimpleNamespace

    from termagent.train.sampling import unseen_tasks_of_solved_families

    train = [SimpleNamespace(id=f"{fam}-{i}", family=fam) for fam in ("chmod", "grep", "sed") for i in range(3)]
    earlier = {"chmod-0": {"passes": 2, "family": "chmod"}, "grep-0": {"passes": 0, "family": "grep"},
               "sed-0": {"passes": 1, "family": "sed"}}
    fam = lambda t: t.family
    lines: list[str] = []
    keep = unseen_tasks_of_solved_families(earlier, train, fam, {"chmod-0": "sft", "sed-0": "dpo"}, log=lines.append)
    # the solved families' other tasks, never those SFT/DPO trained on, never an unsolved family
    assert keep == {"chmod-1", "chmod-2", "sed-1", "sed-2"}
    assert "2 left out" in lines[-1]
    # every task of a solved family trained on: all of them, said
    keep = unseen_tasks_of_solved_families({"sed-0": {"passes": 1, "family": "sed"}}, train[6:], fam,
                                           {t.id: "sft" for t in train}, log=lines.append)
    assert keep == {"sed-0", "sed-1", "sed-2"} and "trained on all 3" in lines[-1]


def test_the_oracle_demos_exclude_no_task_from_mt_grpo(tmp_path):
    import json

    from termagent.curate.select import tasks_trained_by

    demos, passes = tmp_path / "demos.jsonl", tmp_path / "rft.jsonl"
    row = lambda tid: json.dumps({"task_id": tid, "messages": [{"role": "user", "content": tid},
                                                               {"role": "assistant", "content": "x"}]})
    demos.write_text("\n".join(row(t) for t in ("a", "b", "c")) + "\n")
    passes.write_text(row("b") + "\n")
    sft = tmp_path / "sft"
    sft.mkdir()
    (sft / "manifest.json").write_text(json.dumps({"stage": "sft", "params": {"datasets": [str(demos), str(passes)]}}))
    assert set(tasks_trained_by([sft])) == {"a", "b", "c"}
    assert tasks_trained_by([sft], ignore=[demos]) == {"b": "sft"}
