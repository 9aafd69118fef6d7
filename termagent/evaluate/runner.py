"""The local eval: held-out tasks × attempts through the sandbox, one trajectory per trial, the
metrics file and the HTML viewer. The same TerminusAgent loop as demos and multi-turn RL, so a
model is evaluated in exactly the format it was trained in.

    records, wall_s = run_local_eval(sandbox, tasks, agent, attempts=2, concurrency=2, model="base")
    metrics = write_eval_outputs(records, out_dir=Path("data/eval/base"),
                                 metrics_path=Path("metrics/eval/base.json"),
                                 model="base", protocol={...}, wall_s=wall_s)

Output layout (out_dir):
    trajectories/<task>__<attempt>.json   the episode record of DESIGN.md §3 + the trial's result
    trajectories/<task>__<attempt>.html   one viewer page per trajectory
    index.json                            [{task_id, attempt, reward, error, n_turns, file}, ...]
    index.html                            tasks × attempts table
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.evaluate.metrics import compute_metrics
from termagent.evaluate.viewer import trajectory_stem, write_viewer


def trajectory_from_trial(trial: dict, *, model: str) -> dict:
    """One trial (TrialResult.to_dict()) as a trajectory: the agent's episode record, with the
    reward, error and verifier output the sandbox added after the agent phase."""
    episode = dict(trial.get("agent_result") or {})
    error = trial.get("error") or episode.get("error")
    return {
        **episode,
        "task_id": trial["task_id"],
        "attempt": int(trial.get("attempt", 0)),
        "model": episode.get("model") or model,
        "reward": trial.get("reward"),
        "rewards": trial.get("rewards"),
        "passed": trial.get("passed"),
        "total": trial.get("total"),
        "error": error,
        "n_turns": episode.get("n_turns", len(episode.get("turns") or [])),
        "tokens": episode.get("tokens") or {"in": 0, "out": 0},
        "summarizations": episode.get("summarizations") or [],
        "turns": episode.get("turns") or [],
        "image": trial.get("image"),
        "timings": trial.get("timings"),
        "verifier_output": trial.get("verifier_output"),
    }


def run_local_eval(
    sandbox, tasks: list, agent, *, attempts: int, concurrency: int, model: str, progress: bool = True
) -> tuple[list[dict], float]:
    """Run every task `attempts` times (attempt 0..attempts-1) with at most `concurrency` trials at
    once. Returns (trajectories, wall seconds)."""
    from termagent.sandbox import run_trials  # heavy (docker SDK): imported when an eval runs

    if attempts < 1:
        raise ValueError(f"eval.attempts must be >= 1, got {attempts}")
    # attempt-major order: with bounded concurrency every task gets its first attempt early
    work = [(task, agent, attempt) for attempt in range(attempts) for task in tasks]
    started = time.monotonic()
    results = run_trials(sandbox, work, concurrency=concurrency, progress=progress)
    wall_s = time.monotonic() - started
    trials = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]
    return [trajectory_from_trial(t, model=model) for t in trials], wall_s


def local_protocol(agent_cfg, tasks: list, *, agent: str, context_limit: int | None) -> dict[str, Any]:
    """The metrics' `protocol` for a local eval: the agent's sampling and context settings (the
    context limit is the agent config's, else the policy's own) and the tasks' timeouts."""

    def spread(values: list[float]) -> float | dict:  # one number when every task agrees
        return values[0] if len(set(values)) == 1 else {"min": min(values), "max": max(values)}

    timeouts = {"agent_sec": spread([t.agent_timeout_sec for t in tasks]),
                "verifier_sec": spread([t.verifier_timeout_sec for t in tasks]), "source": "task.toml"}
    return {"temperature": agent_cfg.temperature, "max_input_tokens": agent_cfg.context_limit or context_limit,
            "max_output_tokens": agent_cfg.max_output_tokens, "max_turns": agent_cfg.max_turns,
            "max_failed_replies": agent_cfg.max_failed_replies, "context_strategy": agent_cfg.context_strategy, "timeouts": timeouts, "agent": agent}


def official_protocol(backend: str, section) -> dict[str, Any]:
    """The metrics' `protocol` of an official run (`eval.harbor` / `eval.tb1` section)."""
    if backend == "harbor":
        return {"temperature": section.temperature, "max_input_tokens": section.max_input_tokens,
                "max_output_tokens": section.max_output_tokens, "timeouts": "dataset defaults",
                "agent": f"harbor {section.agent} ({section.dataset})"}
    return {"temperature": section.temperature, "max_input_tokens": None, "max_output_tokens": None,
            "timeouts": "dataset defaults", "agent": f"tb {section.agent} ({section.dataset})"}


def write_json(path: Path, obj: Any) -> None:
    atomic.write_json(path, obj, default=str)


def write_eval_outputs(
    trajectories: list[dict],
    *,
    out_dir: Path,
    metrics_path: Path,
    model: str,
    protocol: dict[str, Any],
    wall_s: float,
    extra_metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write trajectories, index, viewer and the metrics file; returns the metrics dict."""
    out_dir = Path(out_dir)
    if (out_dir / "trajectories").exists():  # a stale trajectory of an earlier run must not show up
        shutil.rmtree(out_dir / "trajectories")
    (out_dir / "trajectories").mkdir(parents=True)
    trajectories = sorted(trajectories, key=lambda t: (t["task_id"], t["attempt"]))
    index = []
    for t in trajectories:
        stem = trajectory_stem(t["task_id"], t["attempt"])
        write_json(out_dir / "trajectories" / f"{stem}.json", t)
        error = t.get("error")
        index.append(
            {
                "task_id": t["task_id"],
                "attempt": t["attempt"],
                "reward": t.get("reward"),
                "error": error.get("class") if isinstance(error, dict) else error,
                "n_turns": t.get("n_turns"),
                "file": f"trajectories/{stem}.json",
            }
        )
    write_json(out_dir / "index.json", index)

    metrics = compute_metrics(trajectories, protocol=protocol, wall_s=wall_s, model=model)
    metrics.update(extra_metrics or {})
    summary = {
        "accuracy": f"{metrics['accuracy']:.3f} ± {metrics['accuracy_stderr']:.3f}",
        "tasks": metrics["n_tasks"],
        "attempts": metrics["n_attempts"],
        "mean turns": metrics["mean_turns"],
        "wall": f"{metrics['wall_s']:.0f} s",
    }
    write_viewer(trajectories, out_dir, title=f"eval: {model}", summary=summary)
    write_json(metrics_path, metrics)
    return metrics


START_FILE = "start.json"  # termagent.train.warmup's record of where GRPO starts (read here as data: no import)


def untrained_start(model: str, models_dir: Path = Path("models")) -> dict | None:
    """The start record of a model stage that trained nothing (warmup.enabled false: models/warmup holds only
    start.json, which starts GRPO from the base it names); None for any other model. Such a "model" is the base
    under another name: base_eval evaluates it, so its eval stage evaluates nothing (evaluate_model)."""
    target = Path(models_dir) / model
    start = target / START_FILE
    if model == "base" or not start.is_file() or any((target / f).is_file()
                                                     for f in ("config.json", "adapter_config.json")):
        return None
    record = _json_record(start)
    return record if isinstance(record, dict) and record.get("start_from") == "base" else None


def _json_record(path: Path):
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None


def passed_through(model: str, models_dir: Path = Path("models")) -> dict | None:
    """The manifest of a model stage that trained nothing and saved the adapter it started from unchanged (DPO
    with `dpo.skip_if_empty` and no pair: `"skipped"` + `"init_adapter"`); None for any other model. Its eval
    stage evaluates nothing: the adapter is that start's, which that start's own eval stage evaluates."""
    manifest = Path(models_dir) / model / "manifest.json"
    if model == "base" or not manifest.is_file():
        return None
    record = _json_record(manifest)
    if isinstance(record, dict) and record.get("skipped") and record.get("init_adapter"):
        return record
    return None


def model_dirs(model: str, models_dir: Path = Path("models")) -> tuple[Path, Path | None]:
    """(base model directory, adapter directory or None) for a model name: "base" is models/base;
    any other name is models/<name>, an adapter (adapter_config.json) on the base it names
    (base_model_name_or_path, when that is a local directory) or on models/base, or a full model."""
    models_dir = Path(models_dir)
    target = models_dir / model
    if model == "base" or (target / "config.json").is_file() and not (target / "adapter_config.json").is_file():
        if not (target / "config.json").is_file():
            raise FileNotFoundError(f"{target}: no config.json (run `dvc repro {'base_model' if model == 'base' else model}`)")
        return target, None
    adapter_config = target / "adapter_config.json"
    if not adapter_config.is_file():
        raise FileNotFoundError(f"{target}: neither a model (config.json) nor an adapter (adapter_config.json)")
    named = json.loads(adapter_config.read_text()).get("base_model_name_or_path") or ""
    base = Path(named) if named and (Path(named) / "config.json").is_file() else models_dir / "base"
    return base, target


def policy_spec(model: str, models_dir: Path = Path("models"), *, prefix_cache: int = 0) -> str:
    """The in-process policy spec for a model name: hf:models/base[,adapter=models/<name>][,prefix_cache=N]."""
    base, adapter = model_dirs(model, models_dir)
    return (f"hf:{base}" + (f",adapter={adapter}" if adapter else "")
            + (f",prefix_cache={prefix_cache}" if prefix_cache else ""))


def shared_policy(policy, concurrency: int, *, batched: bool = False):
    """The in-process policy that `concurrency` trials share: one call at a time (SerializedPolicy), or with
    batched=True their pending calls coalesced into one batch (BatchingPolicy). Batch over a prefix-cached
    backend (`prefix_cache`): over plain `generate` every call re-prefills its whole padded prompt, which
    measured slower than serialising on the 2-core CPU (metrics/bench_batching.json)."""
    if batched and concurrency > 1 and callable(getattr(policy, "generate_ids", None)):
        from termagent.policy.batching import BatchingPolicy

        return BatchingPolicy(policy)
    return SerializedPolicy(policy)


class SerializedPolicy:
    """One in-process model shared by concurrent trials: generate() calls take turns (the CPU has
    no room for two at once, and a transformers model is not meant to be driven from two threads),
    while containers, terminals and verifiers still overlap."""

    def __init__(self, policy):
        import threading

        self._policy = policy
        self._lock = threading.Lock()

    def generate(self, *args, **kwargs):
        with self._lock:
            return self._policy.generate(*args, **kwargs)

    def count_tokens(self, *args, **kwargs):
        with self._lock:
            return self._policy.count_tokens(*args, **kwargs)

    def __getattr__(self, name):  # name, context_limit, close, ...
        return getattr(self._policy, name)
