"""What an eval writes: the trajectories, their index, the HTML viewer and the metrics file, with the
`protocol` the metrics record (the sampling, context and timeout settings the numbers were measured under).

    metrics = write_eval_outputs(trajectories, out_dir=Path("data/eval/base"),
                                 metrics_path=Path("metrics/eval/base.json"),
                                 model="base", protocol=local_protocol(...), wall_s=wall_s)

Output layout (out_dir):
    trajectories/<task>__<attempt>.json   one trajectory (docs/design.md#trajectory) + the trial's result
    trajectories/<task>__<attempt>.html   one viewer page per trajectory
    index.json                            [{task_id, attempt, reward, error, n_turns, file}, ...]
    index.html                            tasks × attempts table
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.evaluate.metrics import compute_metrics
from termagent.evaluate.viewer import trajectory_stem, write_viewer


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
