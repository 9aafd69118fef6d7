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


def test_cpu_dry_run_runs_every_training_stage_of_the_project(tmp_path):
    """`make gpu-check`'s code at toy shapes: train_sft (with and without checkpointing), train_dpo, the GRPO
    stage's config and trainer, MTGRPOTrainer on synthetic trajectories; each part reports and plans."""
    result = subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--out", str(tmp_path / "b.json"),
                             "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    bench = json.loads((tmp_path / "b.json").read_text())
    parts = bench["parts"]
    assert bench["dry_run"] and set(parts) == {"sft", "sft_nockpt", "dpo", "grpo", "mt_grpo"}
    assert all("error" not in p and "skipped" not in p for p in parts.values()), parts
    assert parts["sft"]["optimizer_steps"] == 1 and parts["sft"]["assistant_tokens"] > 0
    assert parts["sft"]["gradient_checkpointing"] and not parts["sft_nockpt"]["gradient_checkpointing"]
    assert parts["dpo"]["optimizer_steps"] == 1 and parts["dpo"]["pairs"]["used"] > 0
    assert parts["grpo"]["completions"] == 2 and parts["mt_grpo"]["trajectories"] == 4
    assert all(p["plan_fits"] for p in parts.values())
    # the base model carries the project template made from TRL's stock Qwen3 one
    from transformers import AutoTokenizer

    from termagent.models.templates import HEADER, has_generation_markers

    template = AutoTokenizer.from_pretrained(tmp_path / "work" / "base").chat_template
    assert template.startswith(HEADER.rstrip("\n")) and has_generation_markers(template)
