"""DVC stage `report`: every evaluated model against the base — which tasks each solves, the overlap
between models, the difference in accuracy with a paired bootstrap interval over tasks.

    python stages/report.py metrics/eval/*.json --train-metrics metrics/warmup/train.json ...
                                                    # what `dvc repro report` runs (files listed in dvc.yaml)

Reads params: report (all keys); with --train-metrics, what the training stages reported (a section of
comparison.md, and a warning when the warmup never copied). Writes metrics/summary.json (a DVC metric), reports/overlap.md,
reports/overlap.json, reports/comparison.md, reports/accuracy.png.
"""

from __future__ import annotations

from termagent.report.cli import report as main  # the one definition of the options: `termagent report`

if __name__ == "__main__":
    main()
