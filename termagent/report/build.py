"""The report: read every model's eval (metrics/eval/<model>.json and the details beside it), write
metrics/summary.json (a few numbers: each model against its start, each RL stage on its trained families),
reports/summary.json (everything, text included), reports/overlap.md, reports/comparison.md and reports/accuracy.png.
Every comparison is on the primary set (eval_id: the same tasks for every model) or a named group.

    metrics = load_eval_metrics([Path("metrics/eval/base.json"), Path("metrics/eval/sft.json")])
    summary = build_summary(metrics, base="base", n_resamples=10000, confidence=0.95, seed=0)
    write_reports(summary, metrics, Path("reports"))
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.evaluate.metrics import details_path
from termagent.report.compare import effective_start, overlap_table, paired_bootstrap, solved_tasks

REQUIRED_FIELDS = ("n_tasks", "n_attempts", "accuracy", "accuracy_stderr", "per_task")

def read_json_object(path: Path, what: str = "an eval metrics file") -> dict:
    """A JSON object from `path`; a clear ValueError naming the file otherwise (the stage turns it into its error)."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: {what} holds a JSON object, not {type(data).__name__}")  # noqa: TRY004 (bad input)
    return data



def read_details(path: Path) -> dict:
    """The details of the eval whose metrics file is `path` (metrics/eval/<model>.details.json)."""
    details = details_path(path)
    if not details.is_file():
        raise ValueError(f"{path}: no {details.name} beside it (the per-task outcomes the report compares)")
    return read_json_object(details, "an eval details file")


def not_evaluated(paths: list[Path]) -> dict[str, str]:
    """{model name: why} for the models that were not evaluated (`evaluated: false`: a warmup that was off trained
    nothing, termagent.evaluate.model.write_not_evaluated; the reason is in the details)."""
    out: dict[str, str] = {}
    for path in sorted(Path(p) for p in paths):
        if read_json_object(path).get("evaluated") is False:
            out[path.stem] = str(read_details(path).get("reason") or "not evaluated")
    return out


def load_eval_metrics(paths: list[Path]) -> dict[str, dict]:
    """{model name: details} of the evals whose metrics files are `paths`; the name is the file's stem
    (metrics/eval/sft.json -> "sft"). A model that was not evaluated (`evaluated: false`) is left out:
    `not_evaluated` lists it with the reason."""
    out: dict[str, dict] = {}
    for path in sorted(Path(p) for p in paths):
        if read_json_object(path).get("evaluated") is False:
            continue
        metrics = read_details(path)
        missing = [f for f in REQUIRED_FIELDS if f not in metrics]
        if missing:
            raise ValueError(f"{details_path(path)}: eval details lack field(s) {', '.join(missing)}")
        out[path.stem] = metrics
    if not out:
        raise ValueError("no eval metrics files given")
    return out


def build_summary(
    metrics: dict[str, dict], *, base: str, n_resamples: int, confidence: float, seed: int,
    skipped: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`skipped`: {model: why} for models not evaluated (`not_evaluated`), stated in the reports."""
    if base not in metrics:
        raise ValueError(f"base model {base!r} has no metrics file (have: {', '.join(sorted(metrics))})")
    per_task = {m: x["per_task"] for m, x in metrics.items()}
    models = {
        m: {
            "accuracy": x["accuracy"],
            "accuracy_stderr": x["accuracy_stderr"],
            "pass_at_1": (x.get("pass_at_k") or {}).get("1"),
            "n_tasks": x["n_tasks"],
            "n_attempts": x["n_attempts"],
            "n_solved": len(solved_tasks(x["per_task"])),
            "solved": sorted(solved_tasks(x["per_task"])),
            "wall_s": x.get("wall_s"),
        }
        for m, x in sorted(metrics.items())
    }
    comparisons = {
        m: asdict(
            paired_bootstrap(
                per_task[m], per_task[base], model=m, base=base,
                n_resamples=n_resamples, confidence=confidence, seed=seed,
            )
        )
        for m in sorted(metrics)
        if m != base
    }
    overlap = overlap_table(per_task)
    everyone = sorted(metrics)
    by_split = split_comparisons(metrics, base=base, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return {
        "base": base,
        "models": models,
        "comparisons": comparisons,
        "overlap": overlap,
        "solved_by_all": next((len(g["tasks"]) for g in overlap if g["models"] == everyone), 0),
        "solved_by_none": next((len(g["tasks"]) for g in overlap if not g["models"]), 0),
        "n_common_tasks": sum(len(g["tasks"]) for g in overlap),
        "bootstrap": {"n_resamples": n_resamples, "confidence": confidence, "seed": seed},
        "by_split": by_split,
        "against_start": start_comparisons(metrics, n_resamples=n_resamples, confidence=confidence, seed=seed),
        "not_evaluated": dict(sorted((skipped or {}).items())),
    }


def start_comparisons(metrics: dict[str, dict], *, n_resamples: int, confidence: float,
                      seed: int) -> dict[str, dict]:
    """{model: {"start", "all", "by_split": {group: comparison}}}: each trained model against the model it starts
    from (`effective_start`), paired over the tasks both ran, overall and per held-out group: what each stage
    added, with its CI."""
    out: dict[str, dict] = {}
    for model in sorted(metrics):
        start = effective_start(model, set(metrics))
        if start is None:
            continue
        m, s = metrics[model], metrics[start]
        kw = {"model": model, "base": start, "n_resamples": n_resamples, "confidence": confidence, "seed": seed}
        groups = sorted(set(m.get("by_split") or {}) & set(s.get("by_split") or {}))
        out[model] = {"start": start, "all": asdict(paired_bootstrap(m["per_task"], s["per_task"], **kw)),
                      "by_split": {g: asdict(paired_bootstrap(m["by_split"][g]["per_task"],
                                                              s["by_split"][g]["per_task"], **kw)) for g in groups}}
    return out


def split_comparisons(metrics: dict[str, dict], *, base: str, n_resamples: int, confidence: float,
                      seed: int) -> dict[str, dict]:
    """Per held-out split group (the `by_split` of each eval metrics file): every model's accuracy on it and
    its paired bootstrap comparison with the base on the group's tasks. Groups the base lacks are skipped
    (nothing to compare against); a model without a group is left out of that group."""
    out: dict[str, dict] = {}
    for group, base_metrics in sorted((metrics[base].get("by_split") or {}).items()):
        models = {m: x["by_split"][group] for m, x in sorted(metrics.items()) if group in (x.get("by_split") or {})}
        out[group] = {
            "models": {m: {"accuracy": g["accuracy"], "accuracy_stderr": g["accuracy_stderr"],
                           "n_tasks": g["n_tasks"], "n_solved": len(solved_tasks(g["per_task"]))}
                       for m, g in models.items()},
            "comparisons": {m: asdict(paired_bootstrap(g["per_task"], base_metrics["per_task"], model=m, base=base,
                                                       n_resamples=n_resamples, confidence=confidence, seed=seed))
                            for m, g in models.items() if m != base},
        }
    return out


def overlap_markdown(summary: dict, metrics: dict[str, dict]) -> str:
    models = sorted(summary["models"])
    lines = ["# Which tasks each model solves", "",
             ("A task counts as solved by a model when at least one attempt passed. "
             f"{summary['n_common_tasks']} tasks were evaluated by every model."), "",
             *_not_evaluated_lines(summary),
             "## Solved tasks per model", "",
             "| model | solved | of tasks | accuracy |", "| --- | --- | --- | --- |"]
    for m in models:
        s = summary["models"][m]
        lines.append(f"| {m} | {s['n_solved']} | {s['n_tasks']} | {s['accuracy']:.3f} ± {s['accuracy_stderr']:.3f} |")
    lines += ["", "## Overlap: tasks solved by exactly these models", "",
              "| solved by | n | tasks |", "| --- | --- | --- |"]
    for group in summary["overlap"]:
        who = "all models" if group["models"] == models and len(models) > 1 else (
            ", ".join(group["models"]) or "none")
        lines.append(f"| {who} | {len(group['tasks'])} | {', '.join(group['tasks'])} |")
    lines += ["", "## Pass rate per task", "",
              "| task | " + " | ".join(models) + " |", "| --- |" + " --- |" * len(models)]
    tasks = sorted(set().union(*(metrics[m]["per_task"] for m in models)))
    for t in tasks:
        cells = [f"{metrics[m]['per_task'][t]:.2f}" if t in metrics[m]["per_task"] else "—" for m in models]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _not_evaluated_lines(summary: dict) -> list[str]:
    """A paragraph naming each model left out of the tables and why ([] when every model was evaluated)."""
    skipped = summary.get("not_evaluated") or {}
    if not skipped:
        return []
    return ["Not evaluated, so not in the tables: " + "; ".join(f"`{m}`: {why}" for m, why in skipped.items())
            + ".", ""]


def _verdict(c: dict) -> str:
    return "better" if c["ci_low"] > 0 else "worse" if c["ci_high"] < 0 else "no detectable difference"


def comparison_markdown(summary: dict, training: dict[str, dict] | None = None) -> str:
    """The comparison tables; with `training` ({stage: train.json}), a closing section with what the training
    stages reported (termagent.report.training)."""
    from termagent.report.gains import gains_markdown
    from termagent.report.training import training_markdown

    training = training or {}
    b = summary["bootstrap"]
    lines = [f"# Every model against `{summary['base']}`", "",
             (f"Difference in mean per-task pass rate, with a {b['confidence']:.0%} paired bootstrap "
             f"interval over tasks ({b['n_resamples']} resamples, seed {b['seed']}). "
             "An interval that contains 0 means the eval cannot tell the two apart."), "",
             *_not_evaluated_lines(summary),
             "| model | tasks | accuracy | base | diff | CI low | CI high | P(diff ≤ 0) | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m, c in summary["comparisons"].items():
        lines.append(
            f"| {m} | {c['n_tasks']} | {c['accuracy']:.3f} | {c['base_accuracy']:.3f} | {c['diff']:+.3f} "
            f"| {c['ci_low']:+.3f} | {c['ci_high']:+.3f} | {c['p_not_better']:.3f} | {_verdict(c)} |"
        )
    if not summary["comparisons"]:
        lines.append("| (only the base model has been evaluated) | | | | | | | | |")
    for group, g in (summary.get("by_split") or {}).items():
        lines += ["", f"## Split group `{group}`", "",
                  "| model | tasks | accuracy | base | diff | CI low | CI high | P(diff ≤ 0) | verdict |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for m, c in g["comparisons"].items():
            lines.append(
                f"| {m} | {c['n_tasks']} | {c['accuracy']:.3f} | {c['base_accuracy']:.3f} | {c['diff']:+.3f} "
                f"| {c['ci_low']:+.3f} | {c['ci_high']:+.3f} | {c['p_not_better']:.3f} | {_verdict(c)} |")
        if not g["comparisons"]:
            base_g = g["models"].get(summary["base"], {})
            lines.append(f"| (base only: accuracy {base_g.get('accuracy', 0):.3f} on {base_g.get('n_tasks', 0)} tasks) "
                         "| | | | | | | | |")
    if against := summary.get("against_start"):
        lines += ["", "## Each model against the model it starts from", "",
                  ("What each stage added to the model it trained from (a start that was not evaluated is replaced "
                   "by its own start), paired over the same tasks."), "",
                  "| model | start | group | tasks | accuracy | start's | diff | CI low | CI high | verdict |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for m, a in against.items():
            for group, c in [("all", a["all"]), *a["by_split"].items()]:
                lines.append(
                    f"| {m} | {a['start']} | {group} | {c['n_tasks']} | {c['accuracy']:.3f} | {c['base_accuracy']:.3f} "
                    f"| {c['diff']:+.3f} | {c['ci_low']:+.3f} | {c['ci_high']:+.3f} | {_verdict(c)} |")
    if section := gains_markdown(summary.get("gains") or {}):
        lines += ["", section.rstrip("\n")]
    if section := training_markdown(training):
        lines += ["", section.rstrip("\n")]
    return "\n".join(lines) + "\n"


def plot_accuracy(summary: dict, path: Path) -> None:
    """Bars: accuracy ± 1.96·stderr per model; and model − base with its bootstrap interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(summary["models"])
    acc = [summary["models"][m]["accuracy"] for m in models]
    err = [1.96 * summary["models"][m]["accuracy_stderr"] for m in models]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].bar(models, acc, yerr=err, capsize=4, color="#4c72b0")
    axes[0].set_title("accuracy (±1.96 stderr over attempts)")
    axes[0].set_ylim(0, max(1.0, max(a + e for a, e in zip(acc, err))))
    comps = summary["comparisons"]
    names = list(comps)
    diffs = [comps[m]["diff"] for m in names]
    lows = [comps[m]["diff"] - comps[m]["ci_low"] for m in names]
    highs = [comps[m]["ci_high"] - comps[m]["diff"] for m in names]
    axes[1].bar(names, diffs, yerr=[lows, highs], capsize=4, color="#55a868")
    axes[1].axhline(0, color="black", linewidth=0.8)
    axes[1].set_title(f"difference vs {summary['base']} (paired bootstrap CI)")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    with atomic.target(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def write_reports(summary: dict, metrics: dict[str, dict], reports_dir: Path,
                  summary_path: Path | None = None, training: dict[str, dict] | None = None) -> list[Path]:
    """reports_dir/{summary.json, overlap.md, overlap.json, comparison.md, accuracy.png}, and with `summary_path`
    the few numbers of metrics/summary.json (a DVC metric, `metrics_view`). The `report` stage and `termagent report` both
    write through here."""
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in [("overlap.md", overlap_markdown(summary, metrics)),
                       ("comparison.md", comparison_markdown(summary, training))]:
        written.append(atomic.write_text(reports_dir / name, text))
    written.append(atomic.write_json(reports_dir / "summary.json", summary))
    written.append(atomic.write_json(reports_dir / "overlap.json", {
        "overlap": summary["overlap"], "solved": {m: s["solved"] for m, s in summary["models"].items()}}))
    plot_accuracy(summary, reports_dir / "accuracy.png")
    written.append(reports_dir / "accuracy.png")
    if summary_path is not None:
        written.append(atomic.write_json(summary_path, metrics_view(summary)))
    return written


def _ci(c: dict | None) -> dict | None:
    return None if c is None else {"diff": c["diff"], "ci_low": c["ci_low"], "ci_high": c["ci_high"]}


def metrics_view(summary: dict) -> dict:
    """metrics/summary.json: the few numbers `dvc metrics diff` compares between runs (each model's own accuracy is
    in its metrics/eval/<model>.json): each model against its start on the whole eval_id (`vs_start`), each RL
    stage against its start on the eval_id instances of the families it trained on, the mean over attempts
    (`trained_families`, with the number of tasks). Everything else, text included, is in reports/summary.json."""
    return {
        "vs_start": {m: _ci(a["all"]) for m, a in (summary.get("against_start") or {}).items()},
        "trained_families": {name: {**(_ci(g["trained"]) or {}), "n_tasks": (g["trained"] or {}).get("n_tasks", 0)}
                             for name, g in (summary.get("gains") or {}).items()},
    }
