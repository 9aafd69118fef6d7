"""scripts/gpu_check.py: refuses clearly without CUDA; the same code runs end to end at toy shapes on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal path needs a machine without CUDA")
def test_refuses_without_cuda(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "b.json")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "no CUDA device" in result.stderr
    assert not (tmp_path / "b.json").exists()


def test_cpu_dry_run_exercises_sft_and_grpo_and_the_loss_falls(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--out", str(tmp_path / "b.json")],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    bench = json.loads((tmp_path / "b.json").read_text())
    assert bench["dry_run"] and bench["loss_check"]["fell"]
    assert bench["sft"]["tokens"] == 64 * 2 * 2 and bench["grpo"]["completions"] == 4
