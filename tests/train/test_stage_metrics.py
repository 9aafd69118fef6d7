"""Every training stage's train.json records the process's peak resident memory (a shared host shows there)."""

from __future__ import annotations

import json
from pathlib import Path

from termagent.train.common import peak_rss_gib, write_stage_metrics


def vm_hwm_gib() -> float:
    """The kernel's own high-water mark of this process's resident set (/proc/self/status VmHWM, kB)."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 2**20


def test_the_peak_rss_is_the_kernels_high_water_mark():
    assert abs(peak_rss_gib() - vm_hwm_gib()) < 0.01


def test_train_json_records_the_peak_rss(tmp_path):
    doc = json.loads(write_stage_metrics(tmp_path / "train.json", "sft", steps=1).read_text())
    assert abs(doc["peak_rss_gib"] - vm_hwm_gib()) < 0.05 and doc["stage"] == "sft"
