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
    """An eval's metrics file (a number) and its details beside it (what the report reads)."""
    acc = sum(per_task.values()) / len(per_task)
    path.write_text(json.dumps({"accuracy": acc}))
    path.with_name(f"{path.stem}.details.json").write_text(json.dumps({
        "n_tasks": len(per_task), "n_attempts": 2, "accuracy": acc, "accuracy_stderr": 0.0, "pass_at_k": {"1": acc},
        "per_task": per_task}))


def test_report_stage_writes_summary_metric(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base, n_resamples: 300, confidence: 0.9, seed: 3}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0, "b": 0.5, "c": 0.0})
    write_metrics(tmp_path / "sft.json", {"a": 1.0, "b": 0.5, "c": 0.0})
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), str(tmp_path / "sft.json"), "--params", str(tmp_path / "params.yaml"),
        "--summary", str(tmp_path / "summary.json"), "--reports", str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
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
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
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
    mechanism = json.loads((tmp_path / "reports" / "summary.json").read_text())["mechanism"]
    assert mechanism["sample_warmup"]["tasks_mixed"] == 9 and mechanism["datasets"]["dpo_turns.jsonl"] == 21


def test_a_training_metrics_file_that_is_not_json_is_named(tmp_path):
    (tmp_path / "params.yaml").write_text("report: {base: base}\n")
    write_metrics(tmp_path / "base.json", {"a": 0.0})
    (tmp_path / "train.json").write_text("{oops")
    result = CliRunner().invoke(load_stage().main, [
        str(tmp_path / "base.json"), "--params", str(tmp_path / "params.yaml"), "--summary", str(tmp_path / "s.json"),
        "--reports", str(tmp_path / "r"), "--train-metrics", str(tmp_path / "train.json")])
    assert result.exit_code != 0 and f"{tmp_path / 'train.json'}: not JSON" in result.output


def write_eval(eval_dir, model, outcomes):
    """An eval of the local backend: outcomes {task: (family, [eval attempts], [sampled attempts])} on eval_id."""
    from termagent.evaluate.outputs import write_metrics

    records = [{"task_id": t, "attempt": a, "reward": float(ok), "mode": mode}
               for t, (_, greedy, sampled) in outcomes.items()
               for mode, attempts, first in (("eval", greedy, 0), ("sampled", sampled, len(greedy)))
               for a, ok in enumerate(attempts, first)]
    from termagent.evaluate.outputs import eval_details

    details = eval_details(records, model=model, protocol={}, wall_s=1.0, split_of=dict.fromkeys(outcomes, "eval_id"),
                           families={t: f for t, (f, _, _) in outcomes.items()}, sampled={"attempts": 2})
    write_metrics(eval_dir / f"{model}.json", details)


def test_the_report_measures_each_rl_stage_on_the_families_it_trained_on(tmp_path):
    """--eval-dir reads the models params.yaml evaluates (a stale sft.json is not read); GRPO's gain against the
    warmup on its trained family is the paired bootstrap of the per-task mean over all 3 attempts."""
    evals = tmp_path / "eval"
    evals.mkdir()
    chmod = [f"chmod-{i}" for i in range(8)]
    grep = [f"grep-{i}" for i in range(8)]

    def outcomes(chmod_passes, grep_passes=0):  # the first n chmod tasks pass every attempt; sampled 1 of 2 on grep
        return {**{t: ("chmod-mode", [i < chmod_passes], [i < chmod_passes, 0]) for i, t in enumerate(chmod)},
                **{t: ("grep-count", [0], [i < grep_passes, 0]) for i, t in enumerate(grep)}}

    for model, chmod_passes in {"base": 0, "warmup": 0, "grpo": 6, "dpo": 6, "mt_grpo": 6}.items():
        write_eval(evals, model, outcomes(chmod_passes))
    (evals / "sft.json").write_text("{not json")  # not in eval.models: never read
    (tmp_path / "params.yaml").write_text("report: {base: base, n_resamples: 500}\n"
                                          "eval: {models: {base: [eval_id], warmup: [eval_id], grpo: [eval_id], "
                                          "dpo: [eval_id]}}\n")
    trained = []
    for stage, families in {"grpo": ["chmod-mode"], "mt_grpo": ["grep-count"]}.items():
        trained += ["--trained", str(tmp_path / f"{stage}.json")]
        (tmp_path / f"{stage}.json").write_text(json.dumps({"stage": stage, "families": families}))
    result = CliRunner().invoke(load_stage().main, [
        "--eval-dir", str(evals), "--params", str(tmp_path / "params.yaml"), "--summary", str(tmp_path / "s.json"),
        "--reports", str(tmp_path / "reports"), *trained, "--trained-out", str(tmp_path / "trained_families.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "trained_families.json").read_text()) == {"grpo": ["chmod-mode"],
                                                                             "mt_grpo": ["grep-count"]}
    numbers = json.loads((tmp_path / "s.json").read_text())
    grpo = numbers["trained_families"]["grpo"]
    # 6 of 8 chmod tasks go from 0 to 2 of 3 attempts: +0.5 on the family, a CI above 0
    assert grpo["n_tasks"] == 8 and grpo["diff"] == 0.5 and grpo["ci_low"] > 0
    assert numbers["trained_families"]["mt_grpo"]["diff"] == 0.0  # dpo -> mt_grpo changed nothing on grep
    assert numbers["trained_families"]["final"]["n_tasks"] == 16
    assert numbers["vs_start"]["grpo"]["diff"] == 6 / 16  # greedy, the whole eval_id
    assert "## Each RL stage on the families it trained on" in (tmp_path / "reports" / "comparison.md").read_text()
    (evals / "dpo.json").write_text(json.dumps({"evaluated": False}))  # DPO without a pair: MT-GRPO against the warmup
    (evals / "dpo.details.json").write_text(json.dumps({"evaluated": False, "reason": "no pair"}))
    result = CliRunner().invoke(load_stage().main, [
        "--eval-dir", str(evals), "--params", str(tmp_path / "params.yaml"), "--summary", str(tmp_path / "s.json"),
        "--reports", str(tmp_path / "reports"), *trained])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
    assert summary["gains"]["mt_grpo"]["start"] == "warmup" and summary["not_evaluated"] == {"dpo": "no pair"}
