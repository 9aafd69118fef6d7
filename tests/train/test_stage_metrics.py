"""Every training stage's train.json records the process's peak resident memory (a shared host shows there)."""

from __future__ import annotations

import json

from termagent.train.common import peak_rss_gib, write_stage_metrics


def test_train_json_records_the_peak_rss_and_it_grows_with_what_the_process_held(tmp_path):
    before = peak_rss_gib()
    block = bytearray(256 << 20)  # touch 256 MiB
    block[:: 4096] = b"x" * len(block[:: 4096])
    after = peak_rss_gib()
    assert after >= before + 0.2
    doc = json.loads(write_stage_metrics(tmp_path / "train.json", "sft", steps=1).read_text())
    assert doc["peak_rss_gib"] >= after and doc["stage"] == "sft"
    del block
