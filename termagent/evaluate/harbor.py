"""The official Terminal-Bench 2 path: Harbor runs its own terminus-2 against our served model, and
its job directory is converted into our metrics schema (so `report` compares it like any eval).

Harbor (pinned 0.25.0) needs Python >= 3.12 and internet (it pulls the dataset and task images):
it is never imported, only run as the `harbor` command, and a clear error says so when missing.

Job layout read (Harbor 0.25.0, harbor/job.py, harbor/models/job/result.py, models/trial/result.py):
    <jobs_dir>/<job_name>/result.json          JobResult: n_total_trials, stats.evals[
                                               "<agent>__<model>__<dataset>"].{metrics[0].mean,
                                               reward_stats, exception_stats, n_trials, n_errors}
    <jobs_dir>/<job_name>/<trial>/result.json  TrialResult: task_name, trial_name, started_at,
                                               verifier_result.rewards{reward}, exception_info
                                               {exception_type, exception_message}, agent_result
                                               {n_input_tokens, n_output_tokens, metadata.n_episodes}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termagent.evaluate.config import HarborConfig


class BenchmarkToolMissing(RuntimeError):
    """`harbor` / `tb` is not on PATH."""


@dataclass(frozen=True)
class HarborRunConfig:
    """One `harbor run`: params `eval.harbor` (the section, its defaults) plus what this run serves."""

    served_model: str  # the name the OpenAI-compatible server answers to
    api_base: str  # e.g. http://127.0.0.1:8000/v1
    job_name: str
    n_attempts: int  # eval.attempts
    section: HarborConfig = field(default_factory=HarborConfig)
    extra_agent_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def jobs_dir(self) -> Path:
        return Path(self.section.jobs_dir)


def harbor_model_info(max_input_tokens: int, max_output_tokens: int) -> dict[str, Any]:
    """LiteLLM model_info for a self-served model: the context limits terminus-2 summarises
    against (without it LiteLLM knows nothing of our model) and zero cost."""
    return {
        "max_input_tokens": int(max_input_tokens),
        "max_output_tokens": int(max_output_tokens),
        "max_tokens": int(max_output_tokens),
        "litellm_provider": "openai",  # registered under "openai/<name>": lets get_model_info match it
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
    }


def harbor_run_argv(cfg: HarborRunConfig) -> list[str]:
    """The `harbor run` command line. Flags as in harbor/cli/jobs.py (0.25.0): -d dataset, -a agent,
    -m model, --ak key=value (JSON-parsed), -n concurrent trials, -k attempts, -o jobs dir."""
    agent_kwargs: dict[str, Any] = {
        "api_base": cfg.api_base,
        "model_info": harbor_model_info(cfg.section.max_input_tokens, cfg.section.max_output_tokens),
        "temperature": cfg.section.temperature,
        # terminus-2 sends no max_tokens by default: vLLM would then allow up to the whole
        # remaining context. llm_call_kwargs reach every call (main loop and summarisation).
        "llm_call_kwargs": {"max_tokens": int(cfg.section.max_output_tokens)},
        **cfg.extra_agent_kwargs,
    }
    argv = [
        "harbor", "run",
        "-d", cfg.section.dataset,
        "-a", cfg.section.agent,
        "-m", f"openai/{cfg.served_model}",
    ]
    for key, value in agent_kwargs.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        argv += ["--ak", f"{key}={text}"]
    argv += [
        "-n", str(cfg.section.n_concurrent),
        "-k", str(cfg.n_attempts),
        "-o", str(cfg.jobs_dir),
        "--job-name", cfg.job_name,
    ]
    return argv


def require_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BenchmarkToolMissing(
            f"`{name}` is not installed or not on PATH. {why} "
            "It needs Python >= 3.12 and internet access; it cannot run on the embedded CPU profile."
        )
    return path


def run_harness(argv: list[str], out_dir: Path, *, log_path: Path | None = None) -> None:
    """Run an official harness (harbor, tb) to completion, its output appended to `log_path`. The API key
    (if any) comes from OPENAI_API_KEY in the environment; a local server needs none, so a placeholder is
    set for LiteLLM. A failed run raises CalledProcessError."""
    env = dict(os.environ)
    env.setdefault("OPENAI_API_KEY", "EMPTY")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with open(log_path or os.devnull, "a") as log:
        subprocess.run(argv, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)


def run_harbor(cfg: HarborRunConfig, *, log_path: Path | None = None) -> Path:
    """Run Harbor; returns the job directory."""
    require_tool("harbor", "Install it with `pip install harbor==0.25.0` (then apply patches/, see patches/README.md).")
    run_harness(harbor_run_argv(cfg), cfg.jobs_dir, log_path=log_path)
    return Path(cfg.jobs_dir) / cfg.job_name


def served_model_id(base_url: str, *, adapter: bool) -> str:
    """The model id requests must name: /v1/models lists the base first and a LoRA adapter after it
    (vLLM), or only the served directory (`transformers serve`)."""
    import httpx

    ids = [m["id"] for m in httpx.get(f"{base_url.rstrip('/')}/models", timeout=30).json().get("data", [])]
    if not ids:
        raise RuntimeError(f"{base_url}/models lists no model")
    return ids[-1] if adapter else ids[0]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None


def _trial_reward(rewards: dict | None) -> float | None:
    if not rewards:
        return None
    if "reward" in rewards:
        return float(rewards["reward"])
    if len(rewards) == 1:
        return float(next(iter(rewards.values())))
    return None  # several named rewards and no "reward": nothing to call the score


def convert_harbor_job(job_dir: Path) -> tuple[list[dict], dict[str, Any]]:
    """(trial records for compute_metrics, Harbor's own job summary) from a Harbor job directory."""
    job_dir = Path(job_dir)
    job_path = job_dir / "result.json"
    if not job_path.exists():
        raise FileNotFoundError(f"{job_path}: no Harbor job result (did `harbor run` finish?)")
    job = _read_json(job_path)
    evals = (job.get("stats") or {}).get("evals") or {}
    summary: dict[str, Any] = {"n_total_trials": job.get("n_total_trials"), "evals": {}}
    for key, stats in evals.items():
        metrics = stats.get("metrics") or []
        summary["evals"][key] = {
            "mean": metrics[0].get("mean") if metrics else None,
            "n_trials": stats.get("n_trials"),
            "n_errors": stats.get("n_errors"),
            "exceptions": {k: len(v) for k, v in (stats.get("exception_stats") or {}).items()},
        }

    trials = []
    for path in sorted(job_dir.glob("*/result.json")):
        trial = _read_json(path)
        if "task_name" not in trial:
            raise ValueError(f"{path}: not a Harbor trial result (no 'task_name')")
        trials.append(trial)
    # Harbor names trials <task>__<random>: attempts are numbered by start time within a task.
    trials.sort(key=lambda t: (t["task_name"], t.get("started_at") or "", t.get("trial_name", "")))
    records, seen = [], {}
    for t in trials:
        attempt = seen.get(t["task_name"], 0)
        seen[t["task_name"]] = attempt + 1
        exc = t.get("exception_info")
        agent = t.get("agent_result") or {}
        meta = agent.get("metadata") or {}
        records.append(
            {
                "task_id": t["task_name"],
                "attempt": attempt,
                "trial_name": t.get("trial_name"),
                "reward": _trial_reward((t.get("verifier_result") or {}).get("rewards")),
                "rewards": (t.get("verifier_result") or {}).get("rewards"),
                "error": {"class": exc["exception_type"], "message": exc.get("exception_message", "")}
                if exc
                else None,
                "n_turns": meta.get("n_episodes"),
                "tokens": {"in": agent.get("n_input_tokens") or 0, "out": agent.get("n_output_tokens") or 0},
                "turns": [],
                "model": ((t.get("agent_info") or {}).get("model_info") or {}).get("name"),
            }
        )
    if not records:
        raise ValueError(f"{job_dir}: no trial result.json files under the job directory")
    return records, summary
