"""Prefix every line of stdin with the Unix time it arrived, tab-separated, flushed at once (for stage minutes).

    dvc exp run --temp -n run17-seed0 mt_grpo_eval report 2>&1 | python scripts/stamp.py > run.log

`scripts/collect_run.py --stage-log run.log` then reads each stage's minutes from its "Running stage" lines, which
survive `dvc exp apply` and `--temp` (output modification times do neither).
"""

import sys
import time

for line in sys.stdin:
    sys.stdout.write(f"{time.time():.0f}\t{line}")
    sys.stdout.flush()
