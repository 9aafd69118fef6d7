"""stages/report.py and `termagent report` / `termagent eval convert` on files in the real schemas."""

import importlib.util
import json
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def load_stage():
    spec = importlib.util.spec_from_file_location("report_stage", ROOT / "stages" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_metrics(path, per_task):
    acc = sum(per_task.values()) / len(per_task)
    path.write_text(json.dumps({"n_tasks": len(per_task), "n_attempts": 2, "accuracy": acc, "accuracy_stderr": 0.0,
                                "pass_at_k": {"1": acc}, "per_task": per_task}))


def test_report_stage_writes_summary_metric(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base, n_resamples: 300, confidence: 0.9, seed: 3}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0, "b": 0.5, "c": 0.0})
    write_metrics(tmp_path / "sft.json", {"a": 1.0, "b": 0.5, "c": 0.0})
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), str(tmp_path / "sft.json"), "--params", str(tmp_path / "params.yaml"),
        "--summary", str(tmp_path / "summary.json"), "--reports", str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["comparisons"]["sft"]["diff"] == 1 / 3
    assert summary["bootstrap"] == {"n_resamples": 300, "confidence": 0.9, "seed": 3}
    assert summary["models"]["sft"]["n_solved"] == 2
    overlap = json.loads((tmp_path / "reports" / "overlap.json").read_text())
    assert overlap["solved"] == {"base": ["b"], "sft": ["a", "b"]}
    for name in ("overlap.md", "comparison.md", "accuracy.png"):
        assert (tmp_path / "reports" / name).stat().st_size > 0


def test_report_stage_without_base_names_it(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base}\n")
    write_metrics(tmp_path / "sft.json", {"a": 1.0})
    result = CliRunner().invoke(load_stage().main, [str(tmp_path / "sft.json"), "--params", str(tmp_path / "params.yaml")])
    assert result.exit_code != 0 and "base model 'base' has no metrics file" in result.output


def _run_with_training(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base, n_resamples: 200}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0, "b": 0.0})
    write_metrics(tmp_path / "warmup.json", {"a": 0.0, "b": 0.5})
    for stage, data in {"warmup": {"stage": "warmup", "global_steps": 24, "n_conversations": 255, "first_loss": 1.31,
                                   "last_loss": 0.42, "train_loss": 0.7},
                        "grpo": {"stage": "grpo", "steps": 8, "n_rollouts": 64, "valid_json_rate": 0.94,
                                 "verifier_pass_rate": 0.0625, "groups": 16, "groups_signal": 5,
                                 "trained_groups_signal_frac": 0.75, "resampled_groups": 3,
                                 "config": {"learning_rate": 1e-4, "max_steps": 8}},
                        "dpo": {"stage": "dpo", "skipped": True, "pairs": {"used": 0}}}.items():
        (tmp_path / stage).mkdir()
        (tmp_path / stage / "train.json").write_text(json.dumps(data))
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), str(tmp_path / "warmup.json"), "--params", str(tmp_path / "params.yaml"),
        "--summary", str(tmp_path / "summary.json"), "--reports", str(tmp_path / "reports"),
        *[a for s in ("warmup", "grpo", "dpo") for a in ("--train-metrics", str(tmp_path / s / "train.json"))]])
    assert result.exit_code == 0, result.output
    return result, (tmp_path / "reports" / "comparison.md").read_text()


def test_the_report_says_what_the_training_stages_reported(tmp_path):
    _, text = _run_with_training(tmp_path)
    section = text.split("## What the training stages reported", 1)[1]
    assert "| warmup | 24 steps over 255 conversations, loss 1.310 -> 0.420 (mean 0.700) |" in section
    assert "5/16 groups drawn with a pass and a fail, **0.75 of the groups trained on** after 3 resampled" in section
    assert "learning-rate mass 8.00e-04" in section
    assert "| dpo | **skipped**" in section
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mechanism"]["grpo"]["trained_groups_signal_frac"] == 0.75
    assert summary["mechanism"]["dpo"] == {"pairs_used": 0, "skipped": True, "steps": None,
                                           "last_reward_accuracy": None}


def test_the_report_carries_the_solve_rates_and_the_datasets_built(tmp_path):
    rates = tmp_path / "sample" / "warmup" / "rates.json"
    rates.parent.mkdir(parents=True)
    rates.write_text(json.dumps({"model": "warmup", "temperature": 1.0, "attempts": 4, "summary": {
        "tasks": 48, "episodes": 192, "pass_rate": 0.2, "tasks_mixed": 9, "tasks_all_pass": 2, "tasks_all_fail": 37,
        "infra_failures": 0}, "tasks": {}}))
    datasets = tmp_path / "datasets_summary.json"
    datasets.write_text(json.dumps({"counts": {"rft_sft.jsonl": 14, "dpo_turns.jsonl": 21, "dpo_filtered.jsonl": 0,
                                               "api_sft.jsonl": 0}}))
    (tmp_path / "params.yaml").write_text("report: {base: base, n_resamples: 200}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0, "b": 0.0})
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), "--params", str(tmp_path / "params.yaml"), "--summary",
        str(tmp_path / "summary.json"), "--reports", str(tmp_path / "reports"), "--rates", str(rates),
        "--datasets-summary", str(datasets)])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "reports" / "comparison.md").read_text()
    assert "**9 tasks with a pass and a fail**, 2 always, 37 never solved" in text
    assert "rft_sft 14 verified passing trajectories, dpo_turns 21 divergent-turn pairs" in text
    mechanism = json.loads((tmp_path / "summary.json").read_text())["mechanism"]
    assert mechanism["sample_warmup"]["tasks_mixed"] == 9 and mechanism["datasets"]["dpo_turns.jsonl"] == 21


def test_a_training_metrics_file_that_is_not_json_is_named(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0})
    (tmp_path / "train.json").write_text("{oops")
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), "--params", str(tmp_path / "params.yaml"), "--summary", str(tmp_path / "s.json"),
        "--reports", str(tmp_path / "r"), "--train-metrics", str(tmp_path / "train.json")])
    assert result.exit_code != 0 and f"{tmp_path / 'train.json'}: not JSON" in result.output
