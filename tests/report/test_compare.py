import json

import pytest

from termagent.report.build import build_summary, load_eval_metrics, metrics_view, write_reports
from termagent.report.compare import overlap_table, paired_bootstrap

TASKS = [f"t{i:02d}" for i in range(30)]


def test_identical_model_has_zero_difference_and_ci_contains_zero():
    base = {t: (i % 3) / 2 for i, t in enumerate(TASKS)}
    c = paired_bootstrap(dict(base), base, n_resamples=2000, seed=1)
    assert c.diff == 0.0 and c.ci_low <= 0 <= c.ci_high and not c.significant


def test_clearly_better_model_excludes_zero():
    base = {t: 0.0 for t in TASKS}
    better = {t: (1.0 if i % 3 else 0.0) for i, t in enumerate(TASKS)}  # 20 of 30 solved
    c = paired_bootstrap(better, base, n_resamples=2000, seed=1)
    assert c.diff == pytest.approx(20 / 30)
    assert c.ci_low > 0 and c.significant and c.p_not_better == 0.0


def test_noisy_small_difference_is_not_significant_and_seeded():
    base = {t: float(i % 2) for i, t in enumerate(TASKS)}
    other = dict(base, t00=1.0)  # one more task solved out of 30
    a = paired_bootstrap(other, base, n_resamples=2000, seed=7)
    b = paired_bootstrap(other, base, n_resamples=2000, seed=7)
    assert a == b
    assert a.ci_low <= 0 <= a.ci_high


def test_bootstrap_pairs_on_common_tasks_only():
    c = paired_bootstrap({"a": 1.0, "b": 1.0, "extra": 0.0}, {"a": 0.0, "b": 1.0}, n_resamples=100)
    assert c.n_tasks == 2 and c.diff == 0.5
    with pytest.raises(ValueError, match="share no evaluated task"):
        paired_bootstrap({"x": 1.0}, {"y": 1.0})


def test_overlap_table_groups_by_exact_solver_set():
    per_task = {
        "base": {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0},
        "sft": {"a": 0.5, "b": 0.5, "c": 0.0, "d": 0.0},
        "dpo": {"a": 1.0, "b": 0.0, "c": 0.2, "d": 0.0},
    }
    table = overlap_table(per_task)
    assert table == [
        {"models": ["base", "dpo", "sft"], "tasks": ["a"]},
        {"models": ["dpo"], "tasks": ["c"]},
        {"models": ["sft"], "tasks": ["b"]},
        {"models": [], "tasks": ["d"]},
    ]


def write_metrics(path, per_task, attempts=2):
    acc = sum(per_task.values()) / len(per_task)
    path.write_text(json.dumps({"accuracy": acc}))
    path.with_name(f"{path.stem}.details.json").write_text(json.dumps({
        "n_tasks": len(per_task), "n_attempts": attempts, "accuracy": acc, "accuracy_stderr": 0.05,
        "pass_at_k": {"1": acc}, "per_task": per_task, "wall_s": 10.0}))


def test_report_files(tmp_path):
    write_metrics(tmp_path / "base.json", {t: 0.0 for t in TASKS})
    write_metrics(tmp_path / "sft.json", {t: (1.0 if i < 15 else 0.0) for i, t in enumerate(TASKS)})
    metrics = load_eval_metrics([tmp_path / "sft.json", tmp_path / "base.json"])
    summary = build_summary(metrics, base="base", n_resamples=500, confidence=0.95, seed=0)
    assert summary["comparisons"]["sft"]["diff"] == pytest.approx(0.5)
    assert summary["solved_by_none"] == 15 and summary["solved_by_all"] == 0
    written = write_reports(summary, metrics, tmp_path / "reports")
    comparison = (tmp_path / "reports" / "comparison.md").read_text()
    assert "| sft | 30 |" in comparison and "better" in comparison
    overlap = (tmp_path / "reports" / "overlap.md").read_text()
    assert "| sft | 15 | t00, t01" in overlap and "| none | 15 |" in overlap
    png = tmp_path / "reports" / "accuracy.png"
    assert png in written and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "reports" / "summary.json").read_text())["models"]["sft"]["n_solved"] == 15
    assert set(metrics_view(summary)["vs_start"]) == {"sft"}  # against its effective start: the base


def test_missing_field_names_the_file(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"accuracy": 0.1}))
    with pytest.raises(ValueError, match=r"bad\.json: no bad\.details\.json beside it"):
        load_eval_metrics([tmp_path / "bad.json"])
    (tmp_path / "bad.details.json").write_text(json.dumps({"accuracy": 0.1}))
    with pytest.raises(ValueError, match=r"bad\.details\.json.*per_task"):
        load_eval_metrics([tmp_path / "bad.json"])
