"""Every training stage's train.json records the process's peak resident memory (a shared host shows there)."""

from __future__ import annotations

import json
import subprocess
import sys

from termagent.train.common import write_stage_metrics

CHILD = """
import json, sys
from termagent.train.common import peak_rss_gib
before = peak_rss_gib()
block = bytearray(512 << 20)
block[::4096] = b"x" * len(block[::4096])
print(json.dumps([before, peak_rss_gib()]))
"""


def test_the_peak_rss_grows_with_what_the_process_held():
    before, after = json.loads(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                                              check=True).stdout)
    assert after >= before + 0.4  # 512 MiB touched, in a fresh process


def test_train_json_records_the_peak_rss(tmp_path):
    doc = json.loads(write_stage_metrics(tmp_path / "train.json", "sft", steps=1).read_text())
    assert doc["peak_rss_gib"] > 0 and doc["stage"] == "sft"
