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
    # which generation ran is in the JSON: a CPU dry run never uses vLLM, MT-GRPO's rows are synthetic by default
    assert bench["vllm"] == {"used": False, "why": "a CPU dry run (TRL's vLLM colocate needs CUDA)"}
    assert parts["grpo"]["generation"] == "in-process model" and not parts["grpo"]["use_vllm"]
    assert parts["mt_grpo"]["rollouts"] == "synthetic trajectories (no generation)"
    assert all(p["plan_fits"] for p in parts.values())
    # the base model carries the project template made from TRL's stock Qwen3 one
    from transformers import AutoTokenizer

    from termagent.models.templates import HEADER, has_generation_markers

    template = AutoTokenizer.from_pretrained(tmp_path / "work" / "base").chat_template
    assert template.startswith(HEADER.rstrip("\n")) and has_generation_markers(template)


def test_mt_grpo_generated_episodes_run_through_the_projects_batching(tmp_path):
    """The code MT-GRPO's step runs on vLLM in `make gpu-check` (GeneratedEpisodes: one thread per episode, each
    call through the token buffer and BatchingPolicy), here on the in-process model: every call of every episode
    went through the batching policy, and the step trained on the generated rows."""
    result = subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--parts", "mt_grpo", "--mt-rollouts",
                             "generated", "--out", str(tmp_path / "b.json"), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    part = json.loads((tmp_path / "b.json").read_text())["parts"]["mt_grpo"]
    assert part["rollouts"] == "in-process model, generated episodes" and not part["use_vllm"]
    generation = part["generation"]
    # 4 episodes x 3 turns = 12 model calls, all through BatchingPolicy (how many met in one batch is timing)
    assert 3 <= generation["generate_calls"] <= 12
    assert generation["generate_calls"] * generation["mean_rows_per_call"] == pytest.approx(12)
    assert generation["sampled_tokens"] > 0 and part["trajectories"] == 4


def test_vllm_on_without_vllm_is_refused_before_any_work(tmp_path):
    pytest.importorskip("trl")
    from importlib.util import find_spec

    if find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    result = subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--vllm", "on", "--out",
                             str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2 and "--vllm on, but a CPU dry run" in result.stderr
    assert not (tmp_path / "b.json").exists()
