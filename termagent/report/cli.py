"""`termagent report METRICS...`: every evaluated model against the base (which tasks each solves, the overlap,
the accuracy difference with a paired bootstrap interval over tasks). It is the `report` stage's command
(stages/report.py runs it): its knobs are params.yaml's `report` section.

    termagent report metrics/eval/*.json --train-metrics metrics/warmup/train.json ...
        -> metrics/summary.json, reports/{overlap.md, overlap.json, comparison.md, accuracy.png}
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.evaluate.config import ReportConfig  # the `report:` section (registered in termagent.params)
from termagent.params import profile_option, read_sections
from termagent.report.build import (
    build_summary,
    load_eval_metrics,
    not_evaluated,
    read_json_object,
    write_reports,
)
from termagent.report.training import load_training_metrics, mechanism_figures


@click.command("report")
@click.argument("metric_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
def report(metric_files: tuple[Path, ...], params_file: Path, profile: str | None, summary_path: Path,
           reports_dir: Path, train_files: tuple[Path, ...], rates_files: tuple[Path, ...],
           datasets_summary: Path | None) -> None:
    """Compare eval metrics files (metrics/eval/*.json) with the base: overlap, paired bootstrap, reports."""
    cfg = read_sections(params_file, profile, missing_ok=True, report=ReportConfig).report
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
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    write_reports(summary, metrics, reports_dir, summary_path=summary_path, training=training)
    for name, s in summary["models"].items():
        click.echo(f"{name:>10}: accuracy {s['accuracy']:.3f} ± {s['accuracy_stderr']:.3f}, solved {s['n_solved']}/{s['n_tasks']}")
    for name, why in summary["not_evaluated"].items():
        click.echo(f"{name:>10}: not evaluated ({why})")
    for name, c in summary["comparisons"].items():
        click.echo(f"{name:>10} - {cfg.base}: {c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]")
    click.echo(f"{summary_path}, {reports_dir}/comparison.md, {reports_dir}/overlap.md, {reports_dir}/accuracy.png")
