"""`termagent report METRICS...`: every evaluated model against the base (which tasks each solves, the overlap,
the accuracy difference with a paired bootstrap interval over tasks). It is the `report` stage's command
(stages/report.py runs it): its knobs are params.yaml's `report` section.

    termagent report metrics/eval/base.json metrics/eval/sft.json --train-metrics metrics/warmup/train.json ...
    termagent report --eval-dir metrics/eval --trained data/rollouts/grpo/families.json ...   # the report stage
        -> metrics/summary.json, reports/{summary.json, overlap.md, overlap.json, comparison.md, accuracy.png},
           and with --trained-out the families each RL stage trained on ({"grpo": [...], "mt_grpo": [...]})

--eval-dir reads <dir>/<model>.json of every model params.yaml evaluates (eval.models and the final model), so a
stale file of a model no longer evaluated is never read.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent import atomic
from termagent.evaluate.config import (  # registered in termagent.params
    EvalConfig,
    ReportConfig,
    evaluated_models,
)
from termagent.params import profile_option, read_sections
from termagent.report.build import (
    build_summary,
    load_eval_metrics,
    not_evaluated,
    read_json_object,
    write_reports,
)
from termagent.report.gains import family_gains
from termagent.report.training import load_training_metrics, mechanism_figures


@click.command("report")
@click.argument("metric_files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--eval-dir", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="metrics/eval: the metrics of every model params.yaml evaluates (instead of METRIC_FILES).")
@profile_option
@click.option("--summary", "summary_path", default="metrics/summary.json", show_default=True,
              type=click.Path(path_type=Path))
@click.option("--reports", "reports_dir", default="reports", show_default=True, type=click.Path(path_type=Path))
@click.option("--train-metrics", "train_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A training stage's metrics/<stage>/train.json (repeatable): what it reported, in comparison.md.")
@click.option("--rates", "rates_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A sample stage's data/sample/<model>/rates.json (repeatable): the solve rates RL trained on.")
@click.option("--datasets-summary", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="data/datasets/summary.json: the rows and pairs the datasets stage built.")
@click.option("--trained", "trained_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An RL stage's data/rollouts/<stage>/families.json (repeatable): the families it trained on.")
@click.option("--trained-out", default=None, type=click.Path(path_type=Path),
              help='metrics/trained_families.json: {"grpo": [...], "mt_grpo": [...]} from --trained.')
def report(metric_files: tuple[Path, ...], params_file: Path, profile: str | None, summary_path: Path,
           reports_dir: Path, train_files: tuple[Path, ...], rates_files: tuple[Path, ...],
           datasets_summary: Path | None, eval_dir: Path | None, trained_files: tuple[Path, ...],
           trained_out: Path | None) -> None:
    """Compare eval metrics files (metrics/eval/*.json) with the base: overlap, paired bootstrap, reports."""
    sections = read_sections(params_file, profile, missing_ok=True, report=ReportConfig, eval=EvalConfig)
    cfg = sections.report
    if eval_dir is not None:
        metric_files = (*metric_files, *(eval_dir / f"{m}.json" for m in evaluated_models(sections.eval)))
    if not metric_files:
        raise click.UsageError("give METRIC_FILES or --eval-dir")
    try:
        metrics = load_eval_metrics(list(metric_files))
        summary = build_summary(metrics, base=cfg.base, n_resamples=cfg.n_resamples,
                                confidence=cfg.confidence, seed=cfg.seed, skipped=not_evaluated(list(metric_files)))
        training = load_training_metrics(list(train_files))
        for path in rates_files:  # data/sample/<model>/rates.json -> sample_<model>
            training[f"sample_{path.parent.name}"] = read_json_object(path, "a rates file")
        if datasets_summary is not None:
            training["datasets"] = read_json_object(datasets_summary, "a datasets summary")
        summary["mechanism"] = mechanism_figures(training)
        trained = {str(r.get("stage") or p.parent.name): list(r.get("families") or [])
                   for p in trained_files for r in [read_json_object(p, "a trained-families record")]}
        summary["trained_families"] = trained
        summary["gains"] = family_gains(metrics, trained, n_resamples=cfg.n_resamples, confidence=cfg.confidence,
                                        seed=cfg.seed)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    write_reports(summary, metrics, reports_dir, summary_path=summary_path, training=training)
    if trained_out is not None:
        atomic.write_json(trained_out, trained)
    for name, s in summary["models"].items():
        click.echo(f"{name:>10}: accuracy {s['accuracy']:.3f} ± {s['accuracy_stderr']:.3f}, solved {s['n_solved']}/{s['n_tasks']}")
    for name, why in summary["not_evaluated"].items():
        click.echo(f"{name:>10}: not evaluated ({why})")
    for name, c in summary["comparisons"].items():
        click.echo(f"{name:>10} - {cfg.base}: {c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]")
    for name, g in summary["gains"].items():
        if (c := g["trained"]) is not None:
            click.echo(f"{name:>10}: {g['model']} - {g['start']} on {', '.join(g['families'])} ({c['n_tasks']} tasks, "
                       f"mean over attempts): {c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]")
    click.echo(f"{summary_path}, {reports_dir}/comparison.md, {reports_dir}/overlap.md, {reports_dir}/accuracy.png")
