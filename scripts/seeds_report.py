"""One RL stage against its start over several seeded runs: each seed's paired bootstrap and the seeds pooled.

    python scripts/seeds_report.py metrics/runs/run15_seed0 metrics/runs/run16_seed1 \
        --model grpo --start warmup --out metrics/seeds_grpo.json

Each run directory is what scripts/collect_run.py leaves (eval/<model>.details.json, trained_families.json). A task's
score in one run is the mean over its eval attempts (termagent.report.gains.attempt_means, as the report does).

Pooled: a task's score is its mean over the seeds, for the model and for the start alike, and the bootstrap resamples
tasks (the unit the eval set draws; seeds are averaged inside a task, not counted as more tasks, which would narrow
the interval by pretending two runs of one task are two tasks). "Trained families" pooled are the families every seed's
stage trained on (each seed's own set for its own row).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from termagent.atomic import write_json, write_text
from termagent.report.compare import paired_bootstrap
from termagent.report.gains import attempt_means


def load_run(run: Path, model: str, start: str, stage: str) -> dict:
    def details(name: str) -> dict:
        path = run / "eval" / f"{name}.details.json"
        if not path.is_file():
            raise click.UsageError(f"{path}: no eval details for {name!r} (collect the run with scripts/collect_run.py)")
        return attempt_means(json.loads(path.read_text()))

    trained_path = run / "trained_families.json"
    trained = json.loads(trained_path.read_text()).get(stage) if trained_path.is_file() else None
    if not trained:
        raise click.UsageError(f"{trained_path}: no trained families for stage {stage!r}")
    return {"model": details(model), "start": details(start), "families": sorted(trained)}


def compare(ours: dict, theirs: dict, tasks: set[str], **kw) -> dict:
    return asdict(paired_bootstrap({t: ours[t] for t in tasks}, {t: theirs[t] for t in tasks}, **kw))


def row(name: str, c: dict) -> str:
    return (f"| {name} | {c['n_tasks']} | {c['base_accuracy']:.3f} | {c['accuracy']:.3f} | {c['diff']:+.3f} "
            f"| [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] | {c['p_not_better']:.3f} |")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--model", default="grpo", show_default=True)
@click.option("--start", default="warmup", show_default=True)
@click.option("--stage", default=None, help="whose trained families count (default: --model)")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False), help="JSON; .md beside it")
@click.option("--n-resamples", default=10000, show_default=True)
@click.option("--seed", default=0, show_default=True, help="the bootstrap's seed")
def main(runs: tuple[Path, ...], model: str, start: str, stage: str | None, out: Path, n_resamples: int,
         seed: int) -> None:
    loaded = {run.name: load_run(run, model, start, stage or model) for run in runs}
    kw = {"model": model, "base": start, "n_resamples": n_resamples, "confidence": 0.95, "seed": seed}
    common = set.intersection(*(set(r["model"]) & set(r["start"]) for r in loaded.values()))
    if not common:
        raise click.UsageError("the runs share no evaluated task")
    family = {t: next(iter(loaded.values()))["model"][t]["family"] for t in common}
    score = {name: {side: {t: r[side][t]["score"] for t in common} for side in ("model", "start")}
             for name, r in loaded.items()}
    per_run = {}
    for name, r in loaded.items():
        fam_tasks = {t for t in common if family[t] in r["families"]}
        per_run[name] = {"families": r["families"],
                         "all": compare(score[name]["model"], score[name]["start"], common, **kw),
                         "trained": compare(score[name]["model"], score[name]["start"], fam_tasks, **kw)}
    pooled_scores = {side: {t: sum(score[n][side][t] for n in loaded) / len(loaded) for t in common}
                     for side in ("model", "start")}
    shared = sorted(set.intersection(*(set(r["families"]) for r in loaded.values())))
    pooled = {"families": shared,
              "all": compare(pooled_scores["model"], pooled_scores["start"], common, **kw),
              "trained": compare(pooled_scores["model"], pooled_scores["start"],
                                 {t for t in common if family[t] in shared}, **kw)}
    doc = {"model": model, "start": start, "runs": per_run, "pooled": pooled, "n_resamples": n_resamples,
           "unit": "task (seeds averaged inside a task)"}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, doc)
    lines = [f"# {model} against {start}, {len(loaded)} seeds", "",
             ("Per task the mean over its eval attempts; paired bootstrap over tasks (95 %); pooled: each task's "
             "score averaged over the seeds first."), "",
             "| run | tasks | start | model | diff | CI | P(diff ≤ 0) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in per_run.items():
        lines += [row(f"{name}, eval_id", r["all"]), row(f"{name}, its trained families", r["trained"])]
    lines += [row("pooled, eval_id", pooled["all"]),
              row(f"pooled, families trained in every seed ({len(shared)})", pooled["trained"])]
    write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
