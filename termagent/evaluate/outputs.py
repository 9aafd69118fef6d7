"""What an eval writes: the trajectories, their index, the HTML viewer, the metrics file (a few numbers, a DVC
metric) and the details beside it (per task and attempt, per group, the `protocol`: the sampling, context and
timeout settings the numbers were measured under).

    details = write_eval_outputs(trajectories, out_dir=Path("data/eval/base"),
                                 metrics_path=Path("metrics/eval/base.json"),
                                 model="base", protocol=local_protocol(...), wall_s=wall_s,
                                 split_of={"grep-count-0003": "eval_id", ...})

metrics/eval/<model>.json (docs/evaluation.md#reading-metricsevalmodeljson), the numbers `dvc metrics diff` compares:
    accuracy, accuracy_stderr    the eval's own attempts (agent.temperature: greedy on the embedded profile) on
                                 eval_id (local backend: the same tasks for every model) or the whole benchmark
    pass_at_k                    only with eval.attempts > 1 (pass@1 is the accuracy)
    sampled                      eval.sampled's k attempts at its temperature on eval_id: accuracy (the mean
                                 pass@1), accuracy_stderr, pass_at_<k>
    by_split                     the accuracy of each other held-out group (eval, eval_ood)
    n_tasks                      the number of tasks of each group
    agent_timeouts, tokens_per_trial           over every trial (the wall time is in the details: `wall_s`)
metrics/eval/<model>.details.json (an output, not a metric): the full compute_metrics of the primary set (per_task,
errors, ended_by, protocol, ...), `by_split` and `sampled.by_split` (the same per group), `outcomes` (per task: its
group, family, each attempt's 0/1), the backend's extras.

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
from termagent.evaluate.config import PRIMARY_GROUP
from termagent.evaluate.metrics import compute_metrics, details_path, is_solved
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


def eval_details(trajectories: list[dict], *, model: str, protocol: dict[str, Any], wall_s: float,
                 split_of: dict[str, str] | None = None, families: dict[str, str | None] | None = None,
                 sampled: dict[str, Any] | None = None) -> dict[str, Any]:
    """The details of one eval (module docstring) from its trajectories; a trajectory with `mode: "sampled"` is one
    of eval.sampled's attempts (`sampled`: their temperature, attempts, seed), every other is the eval's own.
    With `split_of` (task -> held-out group, local backend) the primary set is eval_id, else every task."""
    from termagent.evaluate.splits import metrics_by_split

    main = [t for t in trajectories if t.get("mode") != "sampled"]
    extra = [t for t in trajectories if t.get("mode") == "sampled"]
    kw = {"protocol": protocol, "wall_s": wall_s, "model": model}
    if split_of is None:
        primary, in_primary = "all", main
    else:
        primary, in_primary = PRIMARY_GROUP, [t for t in main if split_of.get(t["task_id"]) == PRIMARY_GROUP]
        if not in_primary:
            raise ValueError(f"eval {model}: no trial on {PRIMARY_GROUP}, the group every model's accuracy is "
                             "measured on")
    details = {**compute_metrics(in_primary, **kw), "primary": primary,
               "trials": {k: v for k, v in compute_metrics(trajectories, **kw).items()
                          if k in ("n_trials", "errors", "retried", "ended_by", "agent_timeouts", "tokens",
                                   "summarizations")}}
    if split_of is not None:
        details["by_split"] = metrics_by_split(main, split_of, **kw)
    if extra:
        by = (metrics_by_split(extra, split_of, **kw) if split_of is not None
              else {"all": compute_metrics(extra, **kw)})
        details["sampled"] = {**(sampled or {}), "by_split": by}
    outcomes: dict[str, dict[str, Any]] = {}
    for t in sorted(trajectories, key=lambda t: (t["task_id"], t["attempt"])):
        o = outcomes.setdefault(t["task_id"], {"split": (split_of or {}).get(t["task_id"]),
                                               "family": (families or {}).get(t["task_id"]),
                                               "attempts": {}, "sampled": {}})
        o["sampled" if t.get("mode") == "sampled" else "attempts"][str(t["attempt"])] = int(is_solved(t.get("reward")))
    details["outcomes"] = outcomes
    return details


def metric_numbers(details: dict[str, Any]) -> dict[str, Any]:
    """The few numbers of metrics/eval/<model>.json (module docstring) from an eval's details."""
    out: dict[str, Any] = {"accuracy": details["accuracy"], "accuracy_stderr": details["accuracy_stderr"]}
    if details["n_attempts"] > 1:
        out["pass_at_k"] = {k: v for k, v in details["pass_at_k"].items() if k != "1"}
    if s := ((details.get("sampled") or {}).get("by_split") or {}).get(details["primary"]):
        k = str(s["n_attempts"])
        out["sampled"] = {"accuracy": s["accuracy"], "accuracy_stderr": s["accuracy_stderr"],
                          f"pass_at_{k}": s["pass_at_k"].get(k)}
    groups = details.get("by_split") or {details["primary"]: details}
    if others := {g: m["accuracy"] for g, m in groups.items() if g != details["primary"]}:
        out["by_split"] = others  # the primary group's is `accuracy`
    out["n_tasks"] = {g: m["n_tasks"] for g, m in groups.items()}
    trials = details["trials"]
    n = trials["n_trials"] or 1
    out["agent_timeouts"] = trials["agent_timeouts"]
    out["tokens_per_trial"] = {"in": round(trials["tokens"]["in"] / n, 1), "out": round(trials["tokens"]["out"] / n, 1)}
    return out


def write_eval_outputs(
    trajectories: list[dict],
    *,
    out_dir: Path,
    metrics_path: Path,
    model: str,
    protocol: dict[str, Any],
    wall_s: float,
    extra_metrics: dict[str, Any] | None = None,
    split_of: dict[str, str] | None = None,
    families: dict[str, str | None] | None = None,
    sampled: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write trajectories, index, viewer, the metrics file and its details (eval_details; `extra_metrics` go into
    the details); returns the details."""
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
                "mode": t.get("mode", "eval"),
                "reward": t.get("reward"),
                "error": error.get("class") if isinstance(error, dict) else error,
                "n_turns": t.get("n_turns"),
                "file": f"trajectories/{stem}.json",
            }
        )
    write_json(out_dir / "index.json", index)

    details = eval_details(trajectories, model=model, protocol=protocol, wall_s=wall_s, split_of=split_of,
                           families=families, sampled=sampled)
    details.update(extra_metrics or {})
    summary = {
        "accuracy": f"{details['accuracy']:.3f} ± {details['accuracy_stderr']:.3f} ({details['primary']})",
        "tasks": details["n_tasks"],
        "attempts": details["n_attempts"],
        "mean turns": details["mean_turns"],
        "wall": f"{details['wall_s']:.0f} s",
    }
    write_viewer(trajectories, out_dir, title=f"eval: {model}", summary=summary)
    write_metrics(metrics_path, details)
    return details


def write_metrics(metrics_path: Path, details: dict[str, Any]) -> None:
    """metrics_path (metric_numbers) and the details beside it (details_path)."""
    write_json(details_path(metrics_path), details)
    write_json(metrics_path, metric_numbers(details))
