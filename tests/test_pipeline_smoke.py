"""The whole DAG on the smoke profile: `dvc repro report` in a scratch copy of the repository.

Every stage runs for real (containers, TRL steps, evals) at the smallest sizes (profiles/smoke.yaml).
Then the DVC promises of the pipeline are checked on the result:
- changing one stage's param makes `dvc status` list that stage and what reads its outputs, nothing else;
- `dvc push` to a remote, a fresh clone, `dvc pull --allow-missing` and the base model rebuilt: nothing left to reproduce.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from termagent.evaluate.config import eval_stage
from tests.scratch_repo import run as _run
from tests.scratch_repo import scratch_copy

MODELS = ["base", "warmup", "grpo", "dpo", "mt_grpo"]  # the evaluated ones (eval.models and the final; sft is opt-in)
# `image` is always_changed (it checks the engine for the tag): it is listed by every `dvc status`.
ALWAYS = {"image"}

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _stale_stages(root: Path) -> set[str]:
    out = _run([sys.executable, "-m", "dvc", "status", "--json"], root)
    return set(json.loads(out or "{}")) - ALWAYS


def _set_param(root: Path, dotted: str, value) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    node = params
    *parents, key = dotted.split(".")
    for p in parents:
        node = node[p]
    node[key] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    """A scratch copy of the repository (tracked and unignored files), on the smoke profile, reproduced."""
    root = scratch_copy(tmp_path_factory.mktemp("pipeline") / "repo", ["smoke"])
    _run([sys.executable, "-m", "dvc", "repro", "report"], root)
    return root


def test_every_stage_ran_and_every_model_was_evaluated_per_split_group(pipeline):
    from termagent.models.artifact import passed_through

    params = yaml.safe_load((pipeline / "params.yaml").read_text())["eval"]
    for model in MODELS:
        metrics = json.loads((pipeline / f"metrics/eval/{model}.json").read_text())
        details = json.loads((pipeline / f"metrics/eval/{model}.details.json").read_text())
        if passed_through(model, pipeline / "models"):  # DPO without a pair: the SFT adapter, eval@sft's
            assert model == "dpo" and metrics == {"evaluated": False} and "which eval@sft evaluates" in details["reason"]
            continue
        assert details["n_attempts"] >= 1 and details["primary"] == "eval_id", model
        groups = params["final"] if model == "mt_grpo" else params["models"][model]
        assert set(metrics["n_tasks"]) == set(groups), model  # the groups of each model's eval
        if model != "base":  # eval.sampled: one sampled attempt per eval_id task, its 0/1 in the details
            assert "sampled" in metrics and all(len(o["sampled"]) == 1 for o in details["outcomes"].values()
                                                if o["split"] == "eval_id"), model
    trained = json.loads((pipeline / "metrics/trained_families.json").read_text())
    assert set(trained) == {"grpo", "mt_grpo"} and trained["grpo"], trained  # families of train tasks only
    for adapter in ["grpo", "sft", "dpo", "mt_grpo"]:
        assert (pipeline / f"models/{adapter}/adapter_config.json").is_file(), adapter
    assert (pipeline / "data/rollouts/grpo/rollouts.jsonl").stat().st_size > 0
    assert (pipeline / "data/rollouts/mt_grpo/rollouts.jsonl").stat().st_size > 0
    summary = json.loads((pipeline / "reports/summary.json").read_text())
    assert set(summary["models"]) | set(summary["not_evaluated"]) == set(MODELS)  # the report read every model's eval
    assert _stale_stages(pipeline) == set()


def test_a_param_change_reruns_only_its_stage_and_what_reads_it(pipeline, tmp_path):
    # `dvc status` names the stages whose own params changed; a repro then reruns them and what reads
    # their outputs, and nothing else. `dvc metrics diff` then shows the two runs side by side, and
    # `dvc plots show` renders the rerun's curves.
    _run(["git", "add", "-A"], pipeline)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first run"], pipeline)
    readers = {"mt_grpo.credit.turn_gamma": {"mt_grpo"}, "dpo.trl.beta": {"dpo"}, "grpo.max_resamples": {"grpo"},
               "eval.attempts": {eval_stage(m) for m in MODELS}, "curate.min_quality": {"curate"},
               "sample.attempts": {"sample_warmup", "sample_dpo"},
               # the run's seed (`dvc exp run -S seed=1`): every training stage, nothing else
               "seed": {"sample_warmup", "warmup", "grpo", "sft", "dpo", "sample_dpo", "curate", "mt_grpo"}}
    original = (pipeline / "params.yaml").read_text()
    try:
        for key, expected in readers.items():
            node = yaml.safe_load(original)
            for part in key.split("."):
                node = node[part]
            _set_param(pipeline, key, node + 1 if isinstance(node, int) else node / 2)
            assert _stale_stages(pipeline) == expected, key
            (pipeline / "params.yaml").write_text(original)
        _set_param(pipeline, "mt_grpo.credit.turn_gamma", 0.9)
        out = _run([sys.executable, "-m", "dvc", "repro", "report"], pipeline)
        ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
        assert ran - ALWAYS == {"mt_grpo", "mt_grpo_eval", "report"}
        assert _stale_stages(pipeline) == set()
        diff = json.loads(_run([sys.executable, "-m", "dvc", "metrics", "diff", "--all", "--json", "HEAD"], pipeline))
        for path, key in [("metrics/eval/mt_grpo.json", "accuracy"), ("metrics/mt_grpo/train.json", "wall_s")]:
            assert {"old", "new"} <= set(diff[path][key]), (path, diff.get(path))
        # which run is which: the changed param, old and new (not wall_s, which two runs can share to the ms)
        params = json.loads(_run([sys.executable, "-m", "dvc", "params", "diff", "--json", "HEAD"], pipeline))
        gamma = params["params.yaml"]["mt_grpo.credit.turn_gamma"]
        assert gamma["new"] == 0.9 and gamma["old"] != 0.9, gamma
        plots = tmp_path / "plots"  # outside the repository: the next test commits its working tree
        _run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(plots)], pipeline)
        page = (plots / "index.html").read_text()
        assert "mt_grpo/dvclive/plots/metrics/loss.tsv" in page  # the rerun's own curve (DVC drops the common `metrics/`)
        assert "<script src=" not in page  # the offline template (configs/dvc_plots_template.html)
        assert (plots / "static" / "workspace_metrics_grpo_reward.png").stat().st_size > 0
    finally:
        (pipeline / "params.yaml").write_text(original)
        _run([sys.executable, "-m", "dvc", "repro", "report"], pipeline)


def test_push_then_a_fresh_clone_pulls_and_has_nothing_to_reproduce(pipeline, tmp_path):
    remote = tmp_path / "remote"
    _run([sys.executable, "-m", "dvc", "remote", "add", "-f", "-d", "smoke", str(remote)], pipeline)
    _run(["git", "add", "-A"], pipeline)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "reproduced", "--allow-empty"],
         pipeline)
    _run([sys.executable, "-m", "dvc", "push"], pipeline)
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(pipeline), str(clone)], tmp_path)
    # models/base is `push: false` (rebuilt from pinned params): pull the rest, rebuild it, nothing else reruns.
    _run([sys.executable, "-m", "dvc", "pull", "--allow-missing"], clone)
    _run([sys.executable, "-m", "dvc", "repro", "base_model"], clone)
    assert _stale_stages(clone) == set()
    assert json.loads((clone / "metrics/eval/mt_grpo.json").read_text()) == json.loads(
        (pipeline / "metrics/eval/mt_grpo.json").read_text())
