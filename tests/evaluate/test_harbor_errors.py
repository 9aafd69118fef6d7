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


def test_an_existing_job_is_resumed_rerunning_every_trial_that_measured_nothing(tmp_path, monkeypatch):
    """The command the stage runs: `harbor run` for a new job; for a job directory that holds Harbor's
    config.json, the folders of trials that measured nothing are removed, then `harbor jobs resume -p DIR`.
    (Harbor itself needs Python >= 3.12; a `harbor` script on PATH records the argv it is given.)"""
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
    # Two trials Harbor's `-f TYPE` filter would never rerun: one with no exception and no verifier reward, one
    # whose infrastructure error is recorded in a step only.
    no_reward = job_dir / "fix-git__aB3xYz1" / "result.json"
    data = json.loads(no_reward.read_text())
    assert data["exception_info"] is None
    data["verifier_result"] = None
    no_reward.write_text(json.dumps(data))
    in_step = job_dir / "count-dataset-tokens__Lk8jHg4" / "result.json"
    data = json.loads(in_step.read_text())
    data["step_results"] = [{"exception_info": {"exception_type": "ApiConnectionError", "exception_message": "died",
                                                "exception_traceback": "", "occurred_at": data["started_at"]}}]
    in_step.write_text(json.dumps(data))
    calls.unlink()
    assert harbor.run_or_resume_harbor(cfg) == (job_dir, "resume")
    assert calls.read_text().split() == ["jobs", "resume", "-p", str(job_dir)]
    # removed before the resume (Harbor runs every planned trial without a folder): the two above and the two
    # infrastructure errors; the scored trials (graded errors included) stay
    left = sorted(p.name for p in job_dir.iterdir() if p.is_dir())
    assert left == ["build-cython-ext__Gh2jKl8", "count-dataset-tokens__Zx9cVb3", "fix-git__Qw7erT2",
                    "regex-log__Po5iUy5"]
    records, _ = harbor.convert_harbor_job(job_dir)
    assert all(r["scored"] for r in records)  # what is left converges: nothing the metrics would refuse


def test_the_harbor_eval_records_the_servers_sampling_defaults(tmp_path):
    from termagent.serve import sampling_defaults

    record = sampling_defaults("vllm", VllmConfig())
    metrics = score_harbor_job(JOB, model="base", cfg=EvalConfig(backend="harbor", harbor=HarborConfig(
        max_error_rate=0.25)), out_dir=tmp_path / "eval", metrics_path=tmp_path / "base.json", wall_s=1.0,
        extra={"serving": record})
    assert json.loads((tmp_path / "base.details.json").read_text())["serving"]["generation_config"] == "vllm"
    assert metrics["serving"] == record


def test_a_running_harbor_job_reports_progress_from_its_directory(tmp_path):
    """JobProgress reads what Harbor writes while it runs (the job's result.json with n_total_trials at the start,
    each trial's result.json when it ends): done/total, passes and errors (infrastructure), with an ETA; trials
    already there (a resumed job's) are not counted again."""
    import io

    job = tmp_path / "job"
    job.mkdir()
    stream, now = io.StringIO(), [0.0]
    (job / "fix-git__aB3xYz1").mkdir()  # a finished trial of an earlier run (resume): not counted
    shutil.copy(JOB / "fix-git__aB3xYz1" / "result.json", job / "fix-git__aB3xYz1" / "result.json")
    progress = harbor.JobProgress(job, "harbor base", stream=stream, clock=lambda: now[0], heartbeat=False, every=1)
    progress()  # Harbor has not written the job's result.json yet: nothing to say
    assert stream.getvalue() == ""
    shutil.copy(JOB / "result.json", job / "result.json")  # n_total_trials: 8
    progress()  # the job started at 0 s
    trials = ["count-dataset-tokens__Lk8jHg4", "build-cython-ext__Rt6yUi7", "count-dataset-tokens__Zx9cVb3"]
    for name in trials:  # a pass, an infrastructure error, a graded agent timeout
        now[0] += 60
        shutil.copytree(JOB / name, job / name)
        progress()
    (job / "regex-log__Mn4bVc6").mkdir()  # a trial still running: no result.json yet
    progress()
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "harbor base: 7 to run"
    assert lines[1] == "harbor base: 1/7 done, 1 passed, 1m00s elapsed, ETA 6m00s"
    assert lines[2] == "harbor base: 2/7 done, 1 passed, 1 error, 2m00s elapsed, ETA 5m00s"
    assert lines[3] == "harbor base: 3/7 done, 1 passed, 1 error, 3m00s elapsed, ETA 4m00s"
    assert lines[-1] == "harbor base: 3/7 done, 1 passed, 1 error, 3m00s elapsed, ETA 4m00s (stopped)"
