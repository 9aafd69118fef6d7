"""Prefix every line of stdin with the Unix time it arrived, tab-separated, flushed at once (for stage minutes).

    dvc exp run --temp -n run17-seed0 mt_grpo_eval report 2>&1 | python scripts/stamp.py > run.log

`scripts/collect_run.py --stage-log run.log` then reads each stage's minutes from its "Running stage" lines, which
survive `dvc exp apply` and `--temp` (output modification times do neither).
"""

import sys
import time

# bytes in, bytes out: a line is what ends at b"\n" (a progress bar's \r redraws stay in it), and output that is not
# valid text in the locale's encoding cannot stop the stamping (and with it, through the pipe, the run)
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"%.0f\t" % time.time() + line)
    sys.stdout.buffer.flush()
