"""An errored Harbor trial is never the model's 0 (issue 35, defect 3), and the official eval resumes its job
(defect 7). The job directory fixture (fixtures/harbor_job_0.25/) is in Harbor 0.25.0's own result schema
(harbor/models/job/result.py JobResult, harbor/models/trial/result.py TrialResult): 8 trials of 4 tasks, two
scored with an agent error (AgentTimeoutError, ContextLengthExceededError: Harbor grades them, the model's 0) and
two infrastructure errors (EnvironmentStartTimeoutError: no `docker compose`; ApiConnectionError: the server died).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from termagent.evaluate import harbor
from termagent.evaluate.config import EvalConfig, HarborConfig
from termagent.evaluate.model import score_harbor_job
from termagent.serve import VllmConfig

JOB = Path(__file__).parent / "fixtures" / "harbor_job_0.25" / "base-0123456789ab-cafef00d"
INFRA = {"ApiConnectionError": 1, "EnvironmentStartTimeoutError": 1}
GRADED = {"AgentTimeoutError": 1, "ContextLengthExceededError": 1}


def test_convert_separates_graded_errors_from_infrastructure_errors():
    records, summary = harbor.convert_harbor_job(JOB)
    by_name = {r["trial_name"]: r for r in records}
    assert len(records) == 8 and summary["evals"]["terminus-2__openai/termagent__terminal-bench@2.0"]["n_errors"] == 4
    timeout = by_name["count-dataset-tokens__Zx9cVb3"]
    assert timeout["scored"] and timeout["reward"] == 0.0 and timeout["error"]["cause"] == "agent_exhausted_budget"
    context = by_name["regex-log__Po5iUy5"]  # no verifier result at all: still the model's 0, as Harbor grades it
    assert context["scored"] and context["reward"] == 0.0
    for name in ("regex-log__Mn4bVc6", "build-cython-ext__Rt6yUi7"):
        assert not by_name[name]["scored"] and by_name[name]["reward"] is None
    assert by_name["regex-log__Mn4bVc6"]["error"]["cause"] == "sandbox_failed"
    assert by_name["build-cython-ext__Rt6yUi7"]["error"]["cause"] == "model_provider_failed"


def test_metrics_leave_infrastructure_errors_out_and_carry_them(tmp_path):
    cfg = EvalConfig(backend="harbor", harbor=HarborConfig(max_error_rate=0.25))
    metrics = score_harbor_job(JOB, model="base", cfg=cfg, out_dir=tmp_path / "eval", wall_s=1.0,
                               metrics_path=tmp_path / "base.json")
    tally = metrics["harbor_errors"]
    assert (tally["n_trials"], tally["n_scored"], tally["n_infra_errors"]) == (8, 6, 2)
    assert tally["infra_errors"] == INFRA and tally["graded_errors"] == GRADED
    assert tally["infra_causes"] == {"model_provider_failed": 1, "sandbox_failed": 1}
    # 2 solved of the 6 scored trials; the errored trials are neither solved nor in the denominator
    assert metrics["errors"] == GRADED
    written = json.loads((tmp_path / "base.details.json").read_text())
    assert written["harbor_errors"]["infra_errors"] == INFRA
    index = json.loads((tmp_path / "eval" / "index.json").read_text())
    assert len(index) == 6 and all(row["error"] not in INFRA for row in index)
    assert metrics["mean_reward"] == pytest.approx(2 / 6)


def test_too_many_infrastructure_errors_fail_the_stage_naming_the_classes(tmp_path):
    cfg = EvalConfig(backend="harbor")  # the default eval.harbor.max_error_rate: 5 %
    with pytest.raises(harbor.HarborErrorsExceeded) as info:
        score_harbor_job(JOB, model="base", cfg=cfg, out_dir=tmp_path / "eval", metrics_path=tmp_path / "base.json",
                         wall_s=1.0)
    message = str(info.value)
    for needle in ("2 of 8", "eval.harbor.max_error_rate", "ApiConnectionError x1", "EnvironmentStartTimeoutError x1",
                   "sandbox_failed", "harbor jobs resume"):
        assert needle in message, message
    assert not (tmp_path / "base.json").exists()  # no score, not a 0
    assert json.loads((tmp_path / "eval" / "harbor_errors.json").read_text())["infra_errors"] == INFRA


def test_a_job_of_only_infrastructure_errors_is_refused_at_any_threshold(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    for trial in job.glob("*/result.json"):
        data = json.loads(trial.read_text())
        data["exception_info"] = {"exception_type": "EnvironmentStartTimeoutError", "exception_message": "compose",
                                  "exception_traceback": "", "occurred_at": data["started_at"]}
        data["verifier_result"] = None
        trial.write_text(json.dumps(data))
    cfg = EvalConfig(backend="harbor", harbor=HarborConfig(max_error_rate=1.0))
    with pytest.raises(harbor.HarborErrorsExceeded, match="8 of 8"):
        score_harbor_job(job, model="base", cfg=cfg, out_dir=tmp_path / "eval", metrics_path=tmp_path / "m.json",
                         wall_s=1.0)


def test_error_classes_are_harbors_own(harbor_wheel):
    """termagent's table equals _POLICY_GROUPS of the pinned wheel's harbor/models/trial/error_policy.py, and
    the graded causes are those of ErrorPolicy.reward_valid."""
    with zipfile.ZipFile(harbor_wheel) as z:
        source = z.read("harbor/models/trial/error_policy.py").decode()
    tree = ast.parse(source)
    causes = {}
    [enum] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FailureCause"]
    for node in enum.body:
        if isinstance(node, ast.Assign):
            causes[node.targets[0].id] = node.value.value
    [groups] = [n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_POLICY_GROUPS"]
    theirs = {}
    for key, value in zip(groups.value.keys, groups.value.values):
        cause = causes[key.args[0].attr]
        for name in ast.literal_eval(value):
            theirs[name] = cause
    assert harbor.ERROR_CAUSES == theirs
    [policy] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ErrorPolicy"]
    valid = ast.unparse(next(n for n in policy.body if isinstance(n, ast.FunctionDef) and n.name == "reward_valid"))
    assert sorted(harbor.GRADED_CAUSES) == sorted(causes[a] for a in ("AGENT_EXHAUSTED_BUDGET", "AGENT_REFUSED_TASK"))
    assert "AGENT_EXHAUSTED_BUDGET" in valid and "AGENT_REFUSED_TASK" in valid


def test_job_name_is_deterministic_and_follows_the_model_and_params(tmp_path):
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    for d in (base, adapter):
        d.mkdir()
        (d / "config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00" * 1000)
    section = HarborConfig()
    name = harbor.job_name("sft", harbor.model_digest(base, adapter), section, 5, VllmConfig())
    assert name == harbor.job_name("sft", harbor.model_digest(base, adapter), section, 5, VllmConfig())
    assert name.startswith("sft-")
    moved = HarborConfig(jobs_dir="elsewhere", max_error_rate=0.5)  # where it lives, when to refuse: same job
    assert harbor.job_name("sft", harbor.model_digest(base, adapter), moved, 5, VllmConfig()) == name
    assert harbor.job_name("sft", harbor.model_digest(base, adapter), section, 4, VllmConfig()) != name
    assert harbor.job_name("sft", harbor.model_digest(base, adapter), HarborConfig(temperature=0.6), 5,
                           VllmConfig()) != name
    assert harbor.job_name("sft", harbor.model_digest(base, adapter), section, 5,
                           VllmConfig(generation_config="auto")) != name
    (adapter / "adapter_model.safetensors").write_bytes(b"\x01" + b"\x00" * 999)  # retrained: another job
    assert harbor.job_name("sft", harbor.model_digest(base, adapter), section, 5, VllmConfig()) != name


def test_an_existing_job_is_resumed_rerunning_its_infrastructure_errors(tmp_path, monkeypatch):
    """The command the stage runs: `harbor run` for a new job, `harbor jobs resume -p DIR -f TYPE...` for a job
    directory that holds Harbor's config.json. (Harbor itself needs Python >= 3.12; a `harbor` script on PATH
    records the argv it is given.)"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.jsonl"
    script = bin_dir / "harbor"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {calls}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    jobs = tmp_path / "jobs"
    cfg = harbor.HarborRunConfig(served_model="termagent", api_base="http://127.0.0.1:1/v1", job_name=JOB.name,
                                 n_attempts=5, section=HarborConfig(jobs_dir=str(jobs)))
    job_dir, how = harbor.run_or_resume_harbor(cfg)
    assert how == "run" and calls.read_text().split()[:2] == ["run", "-d"]
    assert f"--job-name {JOB.name}" in calls.read_text()
    shutil.copytree(JOB, job_dir)  # what an interrupted `harbor run` left
    calls.unlink()
    assert harbor.run_or_resume_harbor(cfg) == (job_dir, "resume")
    assert calls.read_text().split() == ["jobs", "resume", "-p", str(job_dir), "-f", "ApiConnectionError",
                                         "-f", "CancelledError", "-f", "EnvironmentStartTimeoutError"]


def test_the_harbor_eval_records_the_servers_sampling_defaults(tmp_path):
    from termagent.serve import sampling_defaults

    record = sampling_defaults("vllm", VllmConfig())
    metrics = score_harbor_job(JOB, model="base", cfg=EvalConfig(backend="harbor", harbor=HarborConfig(
        max_error_rate=0.25)), out_dir=tmp_path / "eval", metrics_path=tmp_path / "base.json", wall_s=1.0,
        extra={"serving": record})
    assert json.loads((tmp_path / "base.details.json").read_text())["serving"]["generation_config"] == "vllm"
    assert metrics["serving"] == record
