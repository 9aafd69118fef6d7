"""scripts/collect_run.py reads stage minutes from a run's output stamped by scripts/stamp.py (mtimes do not
survive `dvc exp apply`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_stage_minutes_come_from_the_stamped_log(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts/stamp.py")],
                         input=b"Running stage 'demos':\n 1%\r 9%\rok \xff\n", capture_output=True, check=True,
                         env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"}).stdout  # \xff: no text
    first, second = out.decode(errors="replace").split("\n")[:2]  # bytes: a text-mode read splits at each \r
    assert first.endswith("\tRunning stage 'demos':") and float(first.split("\t")[0]) > 0
    assert second.endswith("\t 1%\r 9%\rok \ufffd")  # a progress bar's redraws stay in the one stamped line
    log = tmp_path / "run.log"  # as stamp.py writes it: 0.5 min of set-up, demos 2 (a progress bar), warmup 10, the end
    log.write_bytes(b"970\tReproducing experiment 'r'\n1000\tRunning stage 'demos':\n1060\tdemos:  1%\r 9%\r 9/9\n"
                    b"1120\tRunning stage 'warmup':\n1720\tUpdating lock file 'dvc.lock'\n")
    ws = tmp_path / "ws"
    (ws / "metrics/eval").mkdir(parents=True)
    subprocess.run([sys.executable, str(REPO / "scripts/collect_run.py"), "--workspace", str(ws), "--run", "r",
                    "--dest", str(tmp_path), "--started", "0", "--stage-log", str(log)], check=True, cwd=REPO)
    doc = json.loads((tmp_path / "metrics/runs/r/minutes.json").read_text())  # --started 0, as after exp apply
    assert doc["stages"] == {"demos": 2.0, "warmup": 10.0} and doc["total"] == 12.5


def test_an_unstamped_log_is_refused_with_its_line(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("Running stage 'demos':\n")
    (tmp_path / "ws").mkdir()
    r = subprocess.run([sys.executable, str(REPO / "scripts/collect_run.py"), "--workspace", str(tmp_path / "ws"),
                        "--run", "r", "--dest", str(tmp_path), "--started", "0", "--stage-log", str(log)],
                       capture_output=True, text=True, cwd=REPO, check=False)
    assert r.returncode != 0 and "run.log:1" in r.stderr and "stamp.py" in r.stderr
