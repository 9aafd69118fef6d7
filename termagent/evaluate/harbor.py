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

Errored trials: Harbor's own classification decides (GRADED_CAUSES below): an agent timeout or context-length
error is the model's 0, anything else (no `docker compose`, a dead server...) is an infrastructure error, left
out of the accuracy, counted per class in the metrics, and past eval.harbor.max_error_rate the stage fails.
The job name is deterministic (model digest + params), so a rerun of an interrupted eval resumes its job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termagent.evaluate.config import HarborConfig
from termagent.sandbox.progress import TrialProgress

log = logging.getLogger(__name__)


class BenchmarkToolMissing(RuntimeError):
    """`harbor` / `tb` is not on PATH."""


class HarborErrorsExceeded(RuntimeError):
    """More trials errored outside the model than eval.harbor.max_error_rate allows."""


# ---- which errored trial is the model's 0 ---------------------------------------------------------------
# Harbor 0.25.0's own table (harbor/models/trial/error_policy.py, _POLICY_GROUPS): exception type -> failure
# cause. A trial's reward measures the model only when every exception it recorded has an agent cause
# (ErrorPolicy.reward_valid): the agent ran out of its budget (timeout, context/output length) or refused. Every
# other cause (sandbox, model server, Harbor, verifier, cancelled, an unknown type) is an infrastructure error:
# the trial is no measurement, so it is left out of the accuracy and counted by class. The test
# tests/evaluate/test_harbor_errors.py checks this table against the pinned wheel's.
GRADED_CAUSES = ("agent_exhausted_budget", "agent_refused_task")
UNKNOWN_CAUSE = "unclassified"
_CAUSES: dict[str, tuple[str, ...]] = {
    "sandbox_failed": (
        "EnvironmentStartTimeoutError", "SandboxBuildFailedError", "AgentSetupTimeoutError", "HealthcheckError",
        "SandboxLikelyOutOfMemoryError", "MemoryLimitExceededError", "SSHAccessError", "GKEExecStreamClosedError",
        "GKEPodNotFoundError", "RuntimeRequestError", "AddTestsDirError", "DownloadVerifierDirError"),
    "model_provider_failed": (
        "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiOverloadedError", "ApiConnectionClosedError",
        "ApiResponseStalledError", "UnknownApiError", "NetworkConnectionError", "ApiConnectionError",
        "ApiUsageLimitError", "RateLimitError", "InternalServerError", "ServiceUnavailableError",
        "APIConnectionError", "APIError", "Timeout", "BadRequestError", "UnprocessableEntityError",
        "UnsupportedParamsError", "APIResponseValidationError", "BudgetExceededError", "AgentAuthenticationError",
        "ModelNotFoundError", "ApiProviderResourceNotFoundError", "AuthenticationError", "PermissionDeniedError",
        "NotFoundError"),
    "harbor_failed": ("ServiceOperationsUnsupportedError", "VercelScopeError", "DspyImportError",
                      "MissingExtraError", "RegradeError"),
    "unclassified": ("NonZeroAgentExitCodeError",),
    "agent_exhausted_budget": ("AgentTimeoutError", "ContextWindowExceededError", "OutputTokenExceededError",
                               "ContextLengthExceededError", "OutputLengthExceededError"),
    "agent_refused_task": ("AgentSafetyRefusalError", "ContentPolicyViolationError"),
    "verifier_failed": ("VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
                        "VerifierOutputParseError"),
    "cancelled": ("CancelledError",),
}
ERROR_CAUSES: dict[str, str] = {name: cause for cause, names in _CAUSES.items() for name in names}
NO_REWARD = "NoVerifierReward"  # a trial with no exception and no reward: Harbor's reward_valid is False too


def error_cause(exception_type: str) -> str:
    return ERROR_CAUSES.get(exception_type, UNKNOWN_CAUSE)


def is_graded(exception_type: str) -> bool:
    """True when a trial ending in this exception is still the model's measurement (its reward, 0 if none)."""
    return error_cause(exception_type) in GRADED_CAUSES


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


def run_harness(argv: list[str], out_dir: Path, *, log_path: Path | None = None,
                watch: Callable[[], None] | None = None, watch_s: float = 5.0) -> None:
    """Run an official harness (harbor, tb) to completion, its output appended to `log_path`; `watch` is called
    every `watch_s` seconds while it runs and once at the end (progress lines). The API key (if any) comes from
    OPENAI_API_KEY in the environment; a local server needs none, so a placeholder is set for LiteLLM. A failed
    run raises CalledProcessError."""
    env = dict(os.environ)
    env.setdefault("OPENAI_API_KEY", "EMPTY")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with open(log_path or os.devnull, "a") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=watch_s)
                    break
                except subprocess.TimeoutExpired:
                    if watch is not None:
                        watch()
        except BaseException:
            proc.terminate()  # an interrupted stage leaves no harness running (the job resumes on the rerun)
            proc.wait()
            raise
    if watch is not None:
        watch()
    if returncode:
        raise subprocess.CalledProcessError(returncode, argv)


class JobProgress:
    """Progress lines of a running Harbor job, read from its directory (TrialProgress: done/total, passes,
    errors, elapsed, ETA). Harbor writes the job's result.json with `n_total_trials` when the job starts and a
    trial's result.json when the trial ends (harbor/job.py, harbor/trial/trial.py `_finalize`, 0.25.0); the trials
    already there when it is made (a resumed job's) are not counted, so the ETA is the remaining trials'."""

    def __init__(self, job_dir: Path, description: str, **progress: Any):
        self.job_dir = Path(job_dir)
        self.description = description
        self.options = progress  # TrialProgress's keyword arguments (a stream, a clock: tests)
        self.seen = {p.parent.name for p in self.job_dir.glob("*/result.json")}
        self.progress: TrialProgress | None = None

    def __call__(self) -> None:
        if self.progress is None:
            try:
                total = int(_read_json(self.job_dir / "result.json")["n_total_trials"])
            except (FileNotFoundError, ValueError, KeyError, TypeError):
                return  # Harbor has not started the job yet
            self.progress = TrialProgress(self.description, max(0, total - len(self.seen)), **self.options)
            self.progress.__enter__()
        for path in sorted(self.job_dir.glob("*/result.json")):
            if path.parent.name in self.seen:
                continue
            try:
                trial = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue  # being written: read it on the next call
            self.seen.add(path.parent.name)
            scored, reward, _ = trial_verdict(trial)
            self.progress.advance(passed=scored and reward is not None and reward >= 1.0, error=not scored)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)


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


def _trial_exceptions(trial: dict) -> list[dict]:
    """The trial-level exception first, then the steps' (Harbor's TrialResult._recorded_exceptions)."""
    found = [trial["exception_info"]] if trial.get("exception_info") else []
    found += [step["exception_info"] for step in trial.get("step_results") or [] if step.get("exception_info")]
    return found


def trial_verdict(trial: dict) -> tuple[bool, float | None, dict | None]:
    """(scored, reward, error) of one Harbor trial result: scored when it measures the model (no exception, or
    only graded ones: then its reward, else 0.0); an infrastructure error or a trial with neither an exception
    nor a verifier reward is not (reward None)."""
    exceptions = _trial_exceptions(trial)
    reward = _trial_reward((trial.get("verifier_result") or {}).get("rewards"))
    if not exceptions:
        if reward is None:
            return False, None, {"class": NO_REWARD, "message": "no exception and no verifier reward",
                                 "cause": UNKNOWN_CAUSE}
        return True, reward, None
    first = exceptions[0]
    error = {"class": first["exception_type"], "message": first.get("exception_message", ""),
             "cause": error_cause(first["exception_type"])}
    if not all(is_graded(e["exception_type"]) for e in exceptions):
        return False, None, error
    # the agent ran out of its budget before a verdict: the model's 0, as Harbor grades it
    return True, 0.0 if reward is None else reward, error


def convert_harbor_job(job_dir: Path) -> tuple[list[dict], dict[str, Any]]:
    """(trial records, Harbor's own job summary) from a Harbor job directory. Each record carries `scored`:
    False for a trial that errored outside the model (see GRADED_CAUSES), whose reward is None and which
    compute_metrics must not see; an agent timeout / context-length trial is scored (its reward, else 0.0)."""
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
        agent = t.get("agent_result") or {}
        meta = agent.get("metadata") or {}
        rewards = (t.get("verifier_result") or {}).get("rewards")
        scored, reward, error = trial_verdict(t)
        records.append(
            {
                "task_id": t["task_name"],
                "attempt": attempt,
                "trial_name": t.get("trial_name"),
                "reward": reward,
                "rewards": rewards,
                "scored": scored,
                "error": error,
                "n_turns": meta.get("n_episodes"),
                "tokens": {"in": agent.get("n_input_tokens") or 0, "out": agent.get("n_output_tokens") or 0},
                "turns": [],
                "model": ((t.get("agent_info") or {}).get("model_info") or {}).get("name"),
            }
        )
    if not records:
        raise ValueError(f"{job_dir}: no trial result.json files under the job directory")
    return records, summary


def tally_errors(records: list[dict], max_error_rate: float) -> dict[str, Any]:
    """What the metrics carry about errored trials: infrastructure errors (left out of the accuracy) and graded
    ones (the model's 0) per exception class, infrastructure errors per cause, and the threshold."""
    infra = [r for r in records if not r["scored"]]
    graded = [r for r in records if r["scored"] and r.get("error")]
    return {
        "n_trials": len(records),
        "n_scored": len(records) - len(infra),
        "n_infra_errors": len(infra),
        "infra_error_rate": len(infra) / len(records) if records else 0.0,
        "max_error_rate": max_error_rate,
        "infra_errors": dict(sorted(Counter(r["error"]["class"] for r in infra).items())),
        "infra_causes": dict(sorted(Counter(r["error"]["cause"] for r in infra).items())),
        "graded_errors": dict(sorted(Counter(r["error"]["class"] for r in graded).items())),
        "infra_trials": sorted(r["trial_name"] or f"{r['task_id']}#{r['attempt']}" for r in infra),
    }


def check_errors(tally: dict[str, Any], job_dir: Path) -> None:
    """Refuse a score when infrastructure errors pass eval.harbor.max_error_rate (or no trial was scored)."""
    if tally["n_scored"] and tally["infra_error_rate"] <= tally["max_error_rate"]:
        return
    classes = ", ".join(f"{name} x{n}" for name, n in tally["infra_errors"].items())
    causes = ", ".join(f"{name} x{n}" for name, n in tally["infra_causes"].items())
    raise HarborErrorsExceeded(
        f"{job_dir}: {tally['n_infra_errors']} of {tally['n_trials']} Harbor trials "
        f"({tally['infra_error_rate']:.1%}) errored outside the model, above eval.harbor.max_error_rate "
        f"{tally['max_error_rate']:.1%}: {classes} (causes: {causes}). They are not scored as the model's 0, so "
        "there is no score; fix the cause (docs/gpu-setup.md: `docker compose version`, the vLLM server log) and "
        "rerun the stage: it resumes this job (`harbor jobs resume`) and reruns only those trials.")


# ---- a resumable job ------------------------------------------------------------------------------------
def _file_digest(path: Path, chunk: int = 16 << 20) -> str:
    """sha256 of a file; of its size, first and last 16 MiB when larger than 64 MiB (a 16 GB base would take a
    minute to read, and its bytes come from a pinned revision anyway)."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        if size <= 4 * chunk:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        else:
            digest.update(f.read(chunk))
            f.seek(size - chunk)
            digest.update(f.read(chunk))
    return digest.hexdigest()


def model_digest(*dirs: Path | None) -> str:
    """A digest of the served model: every file of the base and the adapter (names, sizes, contents)."""
    digest = hashlib.sha256()
    for directory in dirs:
        if directory is None:
            continue
        directory = Path(directory)
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(directory)}:{_file_digest(path)}\n".encode())
    return digest.hexdigest()


def job_name(model: str, model_sha: str, section: HarborConfig, attempts: int, serve: Any = None) -> str:
    """Deterministic: the same model and the same params give the same job, so a rerun resumes it; anything
    that changes the result (the model's bytes, eval.harbor, eval.attempts, serve.vllm) gives a new one."""
    params = {"harbor": asdict(section), "attempts": attempts,
              "serve": asdict(serve) if serve is not None and hasattr(serve, "__dataclass_fields__") else serve}
    for key in ("jobs_dir", "max_error_rate"):  # where the job lives and when to refuse it change no trial
        params["harbor"].pop(key, None)
    params_sha = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return f"{model}-{model_sha[:12]}-{params_sha[:8]}"


def harbor_resume_argv(job_dir: Path) -> list[str]:
    """`harbor jobs resume` (harbor/cli/jobs.py 0.25.0): runs every planned trial that has no folder in the job
    directory (harbor/job.py, _init_remaining_trial_configs)."""
    return ["harbor", "jobs", "resume", "-p", str(job_dir)]


def unmeasured_trials(job_dir: Path) -> list[Path]:
    """The job's trial folders whose result is no measurement of the model (trial_verdict: an infrastructure
    error, or neither an exception nor a verifier reward): what a resume must run again. Harbor's own
    `jobs resume -f TYPE` removes only trials whose trial-level exception is TYPE, so a trial without an
    exception (no reward) or with an infrastructure error in a step only would stay forever, and the stage
    would fail on it at every rerun. Unreadable results are left to Harbor (it skips them)."""
    found = []
    for path in sorted(Path(job_dir).glob("*/result.json")):
        try:
            trial = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if "task_name" in trial and not trial_verdict(trial)[0]:
            found.append(path.parent)
    return found


def run_or_resume_harbor(cfg: HarborRunConfig, *, log_path: Path | None = None) -> tuple[Path, str]:
    """`harbor run` for a new job; when the job directory already holds Harbor's config.json, the trials that
    measured nothing (unmeasured_trials) are removed and `harbor jobs resume` runs them again. Harbor's own output
    goes to `log_path`; progress lines (JobProgress) to stderr. Returns (job directory, "run" | "resume")."""
    require_tool("harbor", "Install it with `make setup` on the GPU machine (.venv-harbor).")
    job_dir = Path(cfg.jobs_dir) / cfg.job_name
    if (job_dir / "config.json").is_file():
        rerun = unmeasured_trials(job_dir)
        if rerun:
            log.warning("%s: %d trial(s) measured nothing (infrastructure error or no verifier reward); removed to "
                        "run again: %s", job_dir, len(rerun), ", ".join(p.name for p in rerun))
        for trial_dir in rerun:
            shutil.rmtree(trial_dir)
        argv, how = harbor_resume_argv(job_dir), "resume"
    else:
        argv, how = harbor_run_argv(cfg), "run"
    progress = JobProgress(job_dir, f"harbor {cfg.job_name}")
    try:
        run_harness(argv, cfg.jobs_dir, log_path=log_path, watch=progress)
    finally:
        progress.close()
    return job_dir, how
