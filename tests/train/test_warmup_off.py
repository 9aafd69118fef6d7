"""`warmup.enabled: false` (the H100 profile) through the stage scripts, fast: the warmup stage writes every
output dvc.yaml declares with no training number in them, the warmup's eval stage evaluates nothing and says so,
and the report leaves the warmup row out with the reason. (tests/test_pipeline_h100.py runs the whole DAG.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from termagent.evaluate.model import evaluate_model
from termagent.models.artifact import passed_through, untrained_start

REPO = Path(__file__).resolve().parents[2]


def stage(script: str, *args: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "stages" / script), *args], check=False, cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def base_metrics(path: Path) -> None:
    """The base's eval outputs: the metric (a number) and the details beside it (per task: what the report reads)."""
    from termagent.evaluate.metrics import details_path

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"accuracy": 0.5}))
    details_path(path).write_text(json.dumps({"n_tasks": 2, "n_attempts": 1, "accuracy": 0.5, "accuracy_stderr": 0.3,
                                              "pass_at_k": {"1": 0.5}, "per_task": {"t1": 1.0, "t2": 0.0}}))


def test_warmup_off_writes_its_outputs_the_eval_skips_it_and_the_report_says_why(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"warmup": {"enabled": False}}))
    # An earlier enabled run's curve must not survive the switch to off.
    stale = tmp_path / "metrics/warmup/dvclive/plots/metrics/loss.tsv"
    stale.parent.mkdir(parents=True)
    stale.write_text("step\tloss\n0\t1.0\n")
    stage("sft.py", "--stage", "warmup", "--base", "models/base", "--out", "models/warmup",
          "--metrics-dir", "metrics/warmup", cwd=tmp_path)
    assert json.loads((tmp_path / "models/warmup/start.json").read_text())["start_from"] == "base"
    train = json.loads((tmp_path / "metrics/warmup/train.json").read_text())
    assert (train["stage"], train["enabled"]) == ("warmup", False) and "last_loss" not in train
    assert [p.name for p in (tmp_path / "metrics/warmup/dvclive").iterdir()] == ["skipped.json"]
    assert (tmp_path / "metrics/warmup/curves.png").stat().st_size > 0

    monkeypatch.chdir(tmp_path)
    assert untrained_start("warmup") is not None and untrained_start("base") is None
    # Nothing about the eval (tasks, sandbox, policy) is needed to say there is nothing to evaluate.
    record = evaluate_model("warmup", None, agent=None, sandbox=None, serve=None, tasks_index=Path("data/tasks.json"),
                            image_record=Path("data/image.json"), out_dir=Path("data/eval/warmup"),
                            metrics_path=Path("metrics/eval/warmup.json"), log=lambda _: None)
    assert record["evaluated"] is False and "accuracy" not in record
    assert json.loads(Path("metrics/eval/warmup.json").read_text()) == {"evaluated": False}  # the metric: no number
    assert json.loads(Path("metrics/eval/warmup.details.json").read_text()) == record  # the reason beside it
    assert json.loads(Path("data/eval/warmup/skipped.json").read_text()) == record

    base_metrics(tmp_path / "metrics/eval/base.json")
    out = stage("report.py", "metrics/eval/base.json", "metrics/eval/warmup.json", "--summary", "metrics/summary.json",
                "--reports", "reports", "--train-metrics", "metrics/warmup/train.json", cwd=tmp_path)
    assert "warmup: not evaluated" in out
    summary = json.loads(Path("reports/summary.json").read_text())
    assert list(summary["models"]) == ["base"] and list(summary["not_evaluated"]) == ["warmup"]
    comparison = Path("reports/comparison.md").read_text()
    assert "Not evaluated, so not in the tables: `warmup`: models/warmup trained no model of its own" in comparison
    assert "| warmup | **off**: warmup.enabled false" in comparison
    assert "`warmup`" in Path("reports/overlap.md").read_text()


def test_a_trained_warmup_is_evaluated(tmp_path):
    # An adapter or a fully fine-tuned warmup holds a model next to its start.json: that one is evaluated.
    for name, marker in [("adapter", "adapter_config.json"), ("full", "config.json")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "start.json").write_text(json.dumps({"start_from": "base", "base": str(tmp_path / name)}))
        (tmp_path / name / marker).write_text("{}")
        assert untrained_start(name, tmp_path) is None


def test_dpo_without_a_pair_is_not_evaluated_again_and_the_report_says_whose_it_is(tmp_path, monkeypatch):
    # DPO with skip_if_empty and no pair saves the SFT adapter unchanged (manifest "skipped" + init_adapter):
    # evaluating it again would re-run sft_eval (greedily, the very same episodes)
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(yaml.safe_dump({"report": {"n_resamples": 100}}))
    dpo = Path("models/dpo")
    dpo.mkdir(parents=True)
    (dpo / "adapter_config.json").write_text("{}")
    (dpo / "manifest.json").write_text(json.dumps({"stage": "dpo", "skipped": "empty input",
                                                   "init_adapter": "models/sft", "pairs": {"used": 0}}))
    (Path("models/sft")).mkdir()
    (Path("models/sft/manifest.json")).write_text(json.dumps({"stage": "sft", "init_adapter": "models/warmup"}))
    assert passed_through("dpo")["init_adapter"] == "models/sft"
    assert passed_through("sft") is None and passed_through("base") is None  # a trained adapter is evaluated
    record = evaluate_model("dpo", None, agent=None, sandbox=None, serve=None, tasks_index=Path("data/tasks.json"),
                            image_record=Path("data/image.json"), out_dir=Path("data/eval/dpo"),
                            metrics_path=Path("metrics/eval/dpo.json"), log=lambda _: None)
    assert record["evaluated"] is False and "accuracy" not in record
    assert record["reason"] == ("models/dpo trained nothing of its own (empty input): it is the adapter of "
                                "models/sft unchanged, which eval@sft evaluates")
    base_metrics(tmp_path / "metrics/eval/base.json")
    out = stage("report.py", "metrics/eval/base.json", "metrics/eval/dpo.json", "--summary", "metrics/summary.json",
                "--reports", "reports", cwd=tmp_path)
    assert "dpo: not evaluated" in out
    assert list(json.loads(Path("reports/summary.json").read_text())["not_evaluated"]) == ["dpo"]
    assert "`dpo`: models/dpo trained nothing of its own" in Path("reports/comparison.md").read_text()
