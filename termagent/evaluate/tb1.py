"""Terminal-Bench 1 (terminal-bench-core==0.1.1) through the `tb` harness (terminal-bench 0.2.18,
Python >= 3.12, internet), converted into our metrics schema.

Run layout read (terminal_bench/harness/harness.py, harness/models.py):
    <output_path>/<run_id>/results.json   BenchmarkResults: results[TrialResults], n_resolved,
                                          n_unresolved, accuracy, pass_at_k, resolved_ids
    TrialResults: task_id, trial_name "<task>.<attempt>-of-<n>.<run_id>", is_resolved,
                  failure_mode ("none", "agent_timeout", "test_timeout", "parse_error",
                  "context_length_exceeded", "output_length_exceeded", ...), parser_results
                  {test: "passed"|"failed"}, total_input_tokens, total_output_tokens, n_commands
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termagent.evaluate.config import TB1Config
from termagent.evaluate.harbor import require_tool, run_harness

# TB1 failure modes -> the error classes our sandbox and Harbor use, so one errors{} table reads the
# same for every backend. Modes not listed keep their TB1 name.
FAILURE_MODE_CLASSES = {
    "agent_timeout": "AgentTimeoutError",
    "test_timeout": "VerifierTimeoutError",
    "context_length_exceeded": "ContextLengthExceededError",
    "output_length_exceeded": "OutputLengthExceededError",
    "parse_error": "VerifierError",  # TB1: the test output could not be parsed
    "fatal_llm_parse_error": "FatalLLMParseError",
    "unknown_agent_error": "AgentError",
    "agent_installation_failed": "AgentSetupError",
}
NO_FAILURE = {"none", "unset", None}


@dataclass(frozen=True)
class TB1RunConfig:
    """One `tb run`: params `eval.tb1` (the section, its defaults) plus what this run serves."""

    served_model: str
    api_base: str
    run_id: str
    n_attempts: int  # eval.attempts
    section: TB1Config = field(default_factory=TB1Config)

    @property
    def output_path(self) -> Path:
        return Path(self.section.runs_dir)


def tb_run_argv(cfg: TB1RunConfig) -> list[str]:
    """The `tb run` command line (terminal_bench/cli/tb/runs.py, 0.2.18). Its --agent-kwarg values
    are split on '=' once per kwarg, so a value must not contain '='."""
    kwargs = {"api_base": cfg.api_base, "temperature": cfg.section.temperature}
    argv = [
        "tb", "run",
        "--dataset", cfg.section.dataset,
        "--agent", cfg.section.agent,
        "--model", f"openai/{cfg.served_model}",
    ]
    for key, value in kwargs.items():
        if "=" in str(value):
            raise ValueError(f"tb --agent-kwarg {key}: value {value!r} contains '=', which tb cannot parse")
        argv += ["--agent-kwarg", f"{key}={value}"]
    argv += [
        "--n-concurrent", str(cfg.section.n_concurrent),
        "--n-attempts", str(cfg.n_attempts),
        "--output-path", str(cfg.output_path),
        "--run-id", cfg.run_id,
    ]
    return argv


def run_tb1(cfg: TB1RunConfig, *, log_path: Path | None = None) -> Path:
    """Run the TB1 harness; returns the run directory holding results.json."""
    require_tool("tb", "Install it with `pip install terminal-bench==0.2.18`.")
    run_harness(tb_run_argv(cfg), cfg.output_path, log_path=log_path)
    return Path(cfg.output_path) / cfg.run_id


_ATTEMPT = re.compile(r"\.(\d+)-of-(\d+)\.")


def convert_tb1_results(run_dir: Path) -> tuple[list[dict], dict[str, Any]]:
    """(trial records for compute_metrics, TB1's own summary) from a tb run directory (or its
    results.json)."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no TB1 results (did `tb run` finish?)")
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if "results" not in results:
        raise ValueError(f"{path}: not a TB1 BenchmarkResults file (no 'results')")

    records, seen = [], {}
    for i, r in enumerate(results["results"]):
        if "task_id" not in r:
            raise ValueError(f"{path}: results[{i}] has no 'task_id'")
        match = _ATTEMPT.search(r.get("trial_name") or "")
        if match:
            attempt = int(match.group(1)) - 1  # TB1 counts attempts from 1
        else:
            attempt = seen.get(r["task_id"], 0)
        seen[r["task_id"]] = max(seen.get(r["task_id"], 0), attempt + 1)
        mode = r.get("failure_mode")
        tests = r.get("parser_results") or {}
        resolved = r.get("is_resolved")
        records.append(
            {
                "task_id": r["task_id"],
                "attempt": attempt,
                "trial_name": r.get("trial_name"),
                "reward": None if resolved is None else (1.0 if resolved else 0.0),
                "rewards": {"passed": sum(v == "passed" for v in tests.values()), "total": len(tests)},
                "error": None
                if mode in NO_FAILURE
                else {"class": FAILURE_MODE_CLASSES.get(mode, mode), "message": f"tb failure_mode={mode}"},
                "n_turns": None,  # TB1 records commands, not turns
                "n_commands": r.get("n_commands"),
                "tokens": {"in": r.get("total_input_tokens") or 0, "out": r.get("total_output_tokens") or 0},
                "turns": [],
            }
        )
    summary = {
        "n_resolved": results.get("n_resolved"),
        "n_unresolved": results.get("n_unresolved"),
        "accuracy": results.get("accuracy"),
        "pass_at_k": results.get("pass_at_k"),
    }
    return records, summary
