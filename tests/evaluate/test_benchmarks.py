"""Harbor / TB1 adapters: command lines and converters on result files written in the real schemas
(Harbor 0.25.0 JobResult/TrialResult model dumps; terminal-bench 0.2.18 BenchmarkResults)."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from termagent.evaluate.cli import convert
from termagent.evaluate.config import HarborConfig, TB1Config
from termagent.evaluate.harbor import (
    BenchmarkToolMissing,
    HarborRunConfig,
    convert_harbor_job,
    harbor_run_argv,
    require_tool,
)
from termagent.evaluate.metrics import compute_metrics
from termagent.evaluate.tb1 import TB1RunConfig, convert_tb1_results, tb_run_argv
from termagent.report.cli import report

MODEL = "termagent-sft"
EVAL_KEY = f"terminus-2__openai/{MODEL}__terminal-bench"


def harbor_trial(task, suffix, started, reward, *, exception=None, tokens=(1200, 300), episodes=4):
    return {
        "id": f"5b3c7a52-0000-4000-8000-{suffix:0>12}",
        "task_name": task,
        "trial_name": f"{task}__{suffix}",
        "trial_uri": f"file:///jobs/j/{task}__{suffix}",
        "task_id": {"org": "laude-institute", "name": task, "ref": "2.0"},
        "source": "terminal-bench",
        "task_checksum": "ab12",
        "config": {"task": {"path": task}, "trial_name": f"{task}__{suffix}", "timeout_multiplier": 1.0},
        "agent_info": {"name": "terminus-2", "version": "2.0.0",
                       "model_info": {"name": f"openai/{MODEL}", "provider": "openai"}},
        "agent_result": {"n_input_tokens": tokens[0], "n_cache_tokens": 0, "n_output_tokens": tokens[1],
                         "cost_usd": 0.0, "model_usage": None, "rollout_details": None,
                         "metadata": {"n_episodes": episodes, "api_request_times_msec": [812.0]}},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "verifier_environment_mode": "shared",
        "exception_info": None if exception is None else {
            "exception_type": exception, "exception_message": "Agent execution timed out after 900.0 seconds",
            "exception_traceback": "Traceback ...", "occurred_at": started},
        "started_at": started,
        "finished_at": started,
        "environment_setup": None, "agent_setup": None, "agent_execution": None, "verifier": None,
        "step_results": None,
    }


def write_harbor_job(job_dir: Path) -> None:
    trials = [
        harbor_trial("hello-world", "aaa1111", "2026-11-29T10:00:00Z", 1.0),
        harbor_trial("hello-world", "bbb2222", "2026-11-29T10:05:00Z", 0.0),
        harbor_trial("fix-git", "ccc3333", "2026-11-29T10:01:00Z", 0.0, exception="AgentTimeoutError",
                     tokens=(9000, 2000), episodes=31),
        harbor_trial("fix-git", "ddd4444", "2026-11-29T10:02:00Z", 1.0),
        harbor_trial("build-pmars", "eee5555", "2026-11-29T10:03:00Z", None,
                     exception="ContextLengthExceededError", tokens=(24000, 100), episodes=12),
        harbor_trial("build-pmars", "fff6666", "2026-11-29T10:04:00Z", 0.0),
    ]
    job = {
        "id": "0f9b1c2e-1111-4222-8333-444455556666",
        "started_at": "2026-11-29T10:00:00Z", "updated_at": "2026-11-29T11:00:00Z",
        "finished_at": "2026-11-29T11:00:00Z", "n_total_trials": 6,
        "stats": {
            "n_completed_trials": 6, "n_errored_trials": 2, "n_running_trials": 0, "n_pending_trials": 0,
            "n_cancelled_trials": 0, "n_retries": 0,
            "evals": {EVAL_KEY: {
                "n_trials": 5, "n_errors": 2, "metrics": [{"mean": 0.4}], "pass_at_k": {"2": 0.667},
                "reward_stats": {"reward": {"1.0": ["hello-world__aaa1111", "fix-git__ddd4444"],
                                            "0.0": ["hello-world__bbb2222", "fix-git__ccc3333",
                                                    "build-pmars__fff6666"]}},
                "exception_stats": {"AgentTimeoutError": ["fix-git__ccc3333"],
                                    "ContextLengthExceededError": ["build-pmars__eee5555"]},
            }},
            "n_input_tokens": 37800, "n_cache_tokens": 0, "n_output_tokens": 3300, "cost_usd": 0.0,
        },
    }
    job_dir.mkdir(parents=True)
    (job_dir / "result.json").write_text(json.dumps(job, indent=4))
    (job_dir / "config.json").write_text("{}")
    for t in trials:
        d = job_dir / t["trial_name"]
        (d / "agent").mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(t, indent=4))


def test_harbor_argv_carries_model_limits_and_attempts(tmp_path):
    cfg = HarborRunConfig(served_model=MODEL, api_base="http://127.0.0.1:8000/v1", job_name="sft-tb2", n_attempts=5,
                          section=HarborConfig(jobs_dir=str(tmp_path / "jobs"), n_concurrent=4, temperature=0.7,
                                                max_input_tokens=24000, max_output_tokens=4096))
    argv = harbor_run_argv(cfg)
    assert argv[:8] == ["harbor", "run", "-d", "terminal-bench@2.0", "-a", "terminus-2", "-m", f"openai/{MODEL}"]
    ak = dict(a.split("=", 1) for a, flag in zip(argv[1:], argv) if flag == "--ak")
    assert ak["api_base"] == "http://127.0.0.1:8000/v1"
    info = json.loads(ak["model_info"])
    assert info["max_input_tokens"] == 24000 and info["max_output_tokens"] == 4096
    assert info["input_cost_per_token"] == 0.0
    assert json.loads(ak["llm_call_kwargs"]) == {"max_tokens": 4096}
    assert json.loads(ak["temperature"]) == 0.7
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i] in ("-n", "-k", "-o", "--job-name")}
    assert flags == {"-n": "4", "-k": "5", "-o": str(tmp_path / "jobs"), "--job-name": "sft-tb2"}


def test_harbor_job_converts_into_metrics_schema(tmp_path):
    write_harbor_job(tmp_path / "job")
    records, summary = convert_harbor_job(tmp_path / "job")
    assert summary["evals"][EVAL_KEY]["mean"] == 0.4
    assert summary["evals"][EVAL_KEY]["exceptions"] == {"AgentTimeoutError": 1, "ContextLengthExceededError": 1}
    by = {(r["task_id"], r["attempt"]): r for r in records}
    # attempts numbered by start time within a task
    assert by[("hello-world", 0)]["trial_name"] == "hello-world__aaa1111"
    assert by[("fix-git", 0)]["error"]["class"] == "AgentTimeoutError"
    assert by[("fix-git", 0)]["tokens"] == {"in": 9000, "out": 2000}
    assert by[("fix-git", 0)]["n_turns"] == 31
    # context length: Harbor grades it (the model ran out of its budget): the model's 0, scored
    assert by[("build-pmars", 0)]["reward"] == 0.0 and by[("build-pmars", 0)]["scored"]

    m = compute_metrics(records, protocol={"agent": "harbor terminus-2"}, wall_s=3600)
    assert m["n_tasks"] == 3 and m["n_attempts"] == 2
    assert m["accuracy"] == pytest.approx(1 / 3)  # attempt 0: hello-world; attempt 1: fix-git
    assert m["per_task"] == {"build-pmars": 0.0, "fix-git": 0.5, "hello-world": 0.5}
    assert m["errors"] == {"AgentTimeoutError": 1, "ContextLengthExceededError": 1}
    assert m["tokens"]["in"] == 37800 and m["tokens"]["out"] == 3300  # = the job totals
    assert m["pass_at_k"]["2"] == pytest.approx(2 / 3)
    assert m["first_turn_valid_json"] is None


def test_harbor_converter_names_the_bad_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="result.json"):
        convert_harbor_job(tmp_path)
    write_harbor_job(tmp_path / "job")
    (tmp_path / "job" / "hello-world__aaa1111" / "result.json").write_text("{not json")
    with pytest.raises(ValueError, match="hello-world__aaa1111"):
        convert_harbor_job(tmp_path / "job")


def tb1_results(run_id="2026-11-29__10-00-00"):
    def trial(task, attempt, resolved, mode="none", tokens=(5000, 800), tests=None):
        return {
            "id": f"1c9e3f0a-0000-4000-8000-{attempt:012d}", "trial_name": f"{task}.{attempt}-of-2.{run_id}",
            "task_id": task, "instruction": "Do the thing.", "is_resolved": resolved, "failure_mode": mode,
            "parser_results": tests if tests is not None else {"test_output": "passed" if resolved else "failed"},
            "recording_path": f"{task}/{task}.{attempt}-of-2.{run_id}/sessions/agent.cast",
            "total_input_tokens": tokens[0], "total_output_tokens": tokens[1], "n_commands": 3,
            "trial_started_at": "2026-11-29T10:00:00+00:00", "trial_ended_at": "2026-11-29T10:03:00+00:00",
            "agent_started_at": None, "agent_ended_at": None, "test_started_at": None, "test_ended_at": None,
        }
    results = [
        trial("hello-world", 1, True), trial("hello-world", 2, True),
        trial("csv-to-parquet", 1, False, mode="agent_timeout"),
        trial("csv-to-parquet", 2, True, tests={"test_a": "passed", "test_b": "passed"}),
        trial("qemu-startup", 1, False, mode="context_length_exceeded"),
        trial("qemu-startup", 2, None, mode="unknown_agent_error", tokens=(None, None), tests={}),
    ]
    return {"id": "7d1f0000-0000-4000-8000-000000000000", "results": results,
            "pass_at_k": {"2": 0.667}, "n_resolved": 3, "n_unresolved": 3,
            "resolved_ids": ["hello-world", "hello-world", "csv-to-parquet"],
            "unresolved_ids": ["csv-to-parquet", "qemu-startup", "qemu-startup"], "accuracy": 0.5}


def test_tb1_results_convert_into_metrics_schema(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(tb1_results()))
    records, summary = convert_tb1_results(run)
    assert summary["n_resolved"] == 3 and summary["accuracy"] == 0.5
    by = {(r["task_id"], r["attempt"]): r for r in records}
    assert set(by) == {(t, a) for t in ("hello-world", "csv-to-parquet", "qemu-startup") for a in (0, 1)}
    assert by[("csv-to-parquet", 0)]["error"]["class"] == "AgentTimeoutError"
    assert by[("csv-to-parquet", 1)]["rewards"] == {"passed": 2, "total": 2}
    assert by[("qemu-startup", 0)]["error"]["class"] == "ContextLengthExceededError"
    assert by[("qemu-startup", 1)]["reward"] is None

    m = compute_metrics(records, protocol={}, wall_s=1)
    assert m["accuracy"] == pytest.approx(summary["accuracy"])  # same number TB1 reports
    assert m["per_task"] == {"csv-to-parquet": 0.5, "hello-world": 1.0, "qemu-startup": 0.0}
    assert m["errors"] == {"AgentError": 1, "AgentTimeoutError": 1, "ContextLengthExceededError": 1}
    assert m["tokens"]["in"] == 25000


def test_tb_run_argv(tmp_path):
    argv = tb_run_argv(TB1RunConfig(served_model=MODEL, api_base="http://127.0.0.1:8000/v1", run_id="base-tb1",
                                    n_attempts=5, section=TB1Config(runs_dir=str(tmp_path), n_concurrent=4)))
    assert argv[:8] == ["tb", "run", "--dataset", "terminal-bench-core==0.1.1", "--agent", "terminus-2",
                        "--model", f"openai/{MODEL}"]
    assert "api_base=http://127.0.0.1:8000/v1" in argv and "temperature=0.7" in argv
    assert argv[argv.index("--n-attempts") + 1] == "5" and argv[argv.index("--run-id") + 1] == "base-tb1"
    with pytest.raises(ValueError, match="contains '='"):
        tb_run_argv(TB1RunConfig(served_model=MODEL, api_base="http://h/v1?a=b", run_id="x", n_attempts=1))


@pytest.mark.skipif(shutil.which("harbor") is not None, reason="harbor is installed here")
def test_missing_harbor_fails_loudly():
    with pytest.raises(BenchmarkToolMissing, match="Python >= 3.12"):
        require_tool("harbor", "Install it.")


def test_cli_convert_harbor_then_report(tmp_path):
    write_harbor_job(tmp_path / "job")
    out = tmp_path / "sft_tb2.json"
    result = CliRunner().invoke(convert, ["harbor", str(tmp_path / "job"), "--model", "sft", "--out", str(out),
                                          "--viewer-dir", str(tmp_path / "view")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "sft_tb2.details.json").read_text())
    assert metrics["backend"] == "harbor" and metrics["n_tasks"] == 3
    assert json.loads(out.read_text())["n_tasks"] == {"all": 3}  # the numbers; the details beside them
    assert "AgentTimeoutError" in (tmp_path / "view" / "index.html").read_text()
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"accuracy": 0.0}))
    (tmp_path / "base.details.json").write_text(json.dumps({
        "n_tasks": 3, "n_attempts": 2, "accuracy": 0.0, "accuracy_stderr": 0.0,
        "per_task": {t: 0.0 for t in metrics["per_task"]}}))
    (tmp_path / "params.yaml").write_text("report: {n_resamples: 200}\n")
    result = CliRunner().invoke(report, [str(base), str(out), "--params", str(tmp_path / "params.yaml"),
                                         "--summary", str(tmp_path / "summary.json"), "--reports", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "sft_tb2 - base:" in result.output
    assert "| sft_tb2 | 3 |" in (tmp_path / "r" / "comparison.md").read_text()


def test_run_harness_logs_output_sets_a_placeholder_key_and_raises_on_failure(tmp_path, monkeypatch):
    import subprocess

    from termagent.evaluate.harbor import run_harness

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    log = tmp_path / "harness.log"
    run_harness(["sh", "-c", 'echo "key=$OPENAI_API_KEY"'], tmp_path / "jobs", log_path=log)
    assert (tmp_path / "jobs").is_dir() and log.read_text() == "key=EMPTY\n"
    with pytest.raises(subprocess.CalledProcessError):
        run_harness(["sh", "-c", "exit 3"], tmp_path / "jobs", log_path=log)
