"""The H100 DAG on a CPU: profiles/h100.yaml (warmup off) with the smoke sizes and CPU stand-ins
(tests/profiles/h100_on_cpu.yaml: the tiny model for the 8B one, vLLM, Harbor and OpenThoughts off), applied to
a scratch copy of the repository; `dvc repro report` runs to the end.

What the warmup being off must not break: every stage's declared outputs exist (the warmup's metrics say it was
off, with no curve or number of training that did not happen), every consumer finds its model (GRPO, SFT, DPO and
MT-GRPO start from the base start.json names), eval@warmup evaluates nothing (that model is the base, which
eval@base evaluates) and says so, and the report names every model, the warmup as not evaluated with the reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.scratch_repo import REPO, run, scratch_copy

TRAINED = ["grpo", "sft", "dpo", "mt_grpo"]
EVALUATED = ["base", *TRAINED]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, harbor_wheel) -> Path:
    """The profile trains and evaluates with Harbor's terminus-2 texts (agent.protocol): read from the pinned wheel."""
    import os

    os.environ["HARBOR_PACKAGE_DIR"] = str(harbor_wheel)  # the stages' environment (scratch_repo.env copies it)
    root = scratch_copy(tmp_path_factory.mktemp("h100") / "repo",
                        ["h100", "smoke", "tests/profiles/h100_on_cpu.yaml"])
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["warmup"]["enabled"] is False and params["base_model"]["source"] == "tiny"
    assert params["agent"]["protocol"] == "harbor-terminus-2"
    run([sys.executable, "-m", "dvc", "repro", "report"], root, timeout=5400)
    return root


def declared_outputs(stage: dict) -> list[str]:
    """The paths a stage declares, its `vars` (mt_grpo_eval's key) substituted."""
    values = {k: v for d in stage.get("vars", []) if isinstance(d, dict) for k, v in d.items()}
    paths = [next(iter(o)) if isinstance(o, dict) else o
             for kind in ("outs", "metrics", "plots") for o in stage.get(kind, [])]
    for key, value in values.items():
        paths = [p.replace("${" + key + "}", str(value)) for p in paths]
    return paths


def test_every_stage_ran_and_every_declared_output_exists(pipeline):
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    missing = {name: [p for p in declared_outputs(s) if not (pipeline / p).exists()] for name, s in stages.items()}
    assert {k: v for k, v in missing.items() if v} == {}
    status = json.loads(run([sys.executable, "-m", "dvc", "status", "--json"], pipeline) or "{}")
    assert set(status) - {"image"} == set()  # `image` is always_changed


def test_the_warmup_says_it_was_off_and_every_consumer_started_from_the_base(pipeline):
    start = json.loads((pipeline / "models/warmup/start.json").read_text())
    assert (start["start_from"], start["base"], start["adapter"]) == ("base", "models/base", None)
    assert sorted(p.name for p in (pipeline / "models/warmup").iterdir()) == ["start.json"]
    train = json.loads((pipeline / "metrics/warmup/train.json").read_text())
    assert train["enabled"] is False and "warmup.enabled false" in train["skipped"]
    assert "last_loss" not in train and "global_steps" not in train  # no number of a training that did not run
    assert [p.name for p in (pipeline / "metrics/warmup/dvclive").iterdir()] == ["skipped.json"]
    for model in TRAINED:
        adapter = json.loads((pipeline / f"models/{model}/adapter_config.json").read_text())
        assert Path(adapter["base_model_name_or_path"]).name == "base", model


def test_warmup_eval_evaluates_nothing_and_the_report_names_every_model(pipeline):
    from termagent.models.artifact import passed_through

    # DPO without a pair saves the SFT adapter unchanged: eval@dpo then evaluates nothing either
    through = [m for m in TRAINED if passed_through(m, pipeline / "models")]
    assert through in ([], ["dpo"])
    for model in through:
        assert json.loads((pipeline / f"metrics/eval/{model}.json").read_text()) == {"evaluated": False}
        record = json.loads((pipeline / f"metrics/eval/{model}.details.json").read_text())
        assert "models/sft unchanged, which eval@sft evaluates" in record["reason"]
    trained = [m for m in TRAINED if m not in through and m != "sft"]  # sft's eval is opt-in (eval.models)
    evaluated = ["base", *trained]
    warmup = json.loads((pipeline / "metrics/eval/warmup.json").read_text())
    assert warmup["evaluated"] is False and "accuracy" not in warmup
    assert json.loads((pipeline / "data/eval/warmup/skipped.json").read_text())["evaluated"] is False
    params = yaml.safe_load((pipeline / "params.yaml").read_text())["eval"]
    groups = {**params["models"], "mt_grpo": params["final"]}
    for model in evaluated:
        metrics = json.loads((pipeline / f"metrics/eval/{model}.json").read_text())
        assert set(metrics["n_tasks"]) == set(groups[model]), model
    summary = json.loads((pipeline / "reports/summary.json").read_text())
    assert sorted(summary["models"]) == sorted(evaluated)
    assert sorted(summary["comparisons"]) == sorted(trained)
    assert sorted(summary["not_evaluated"]) == sorted(["warmup", *through])
    comparison = (pipeline / "reports/comparison.md").read_text()
    for model in trained:
        assert f"| {model} |" in comparison, model
    assert "`warmup`: models/warmup trained no model of its own" in comparison
    assert "| warmup | **off**: warmup.enabled false" in comparison  # the training section
