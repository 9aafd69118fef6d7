"""scripts/bench_engine.py at toy shapes on the tiny model (its real IR): every field the integrator's SmolLM2 run
reads is written, the prompt ids are the chat template's, and the f32 engine's greedy rows equal torch fp32's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_bench_engine_toy_shapes(tiny_model_dir, tiny_openvino_dir, tmp_path):
    out = tmp_path / "bench_engine.json"
    subprocess.run([sys.executable, str(REPO / "scripts/bench_engine.py"), "--model", str(tiny_model_dir),
                    "--rows", "2", "--new-tokens", "8", "--rounds", "2", "--lora-r", "4", "--out", str(out)],
                   check=True, cwd=REPO)
    report = json.loads(out.read_text())
    assert report["ir"] == str(tiny_openvino_dir)
    assert report["prompt_ids_equal_apply_chat_template"] is True
    assert report["eval"]["greedy_rows_equal_fp32"]["engine_f32"] == 2
    assert set(report["eval"]["new_tok_s"]) == {"project", "engine"}
    assert len(report["eval"]["new_tok_s"]["engine"]["samples"]) == 2
    assert set(report["rl"]["new_tok_s"]) == {"project", "runtime", "fuse"}
    assert report["rl"]["faster_adapter_mode"] in ("runtime", "fuse")
    for mode in ("runtime", "fuse"):  # logprobs at the RL temperature through the logits-scaled IR: all scored
        assert report["rl"]["logprob_gap_vs_fp32_peft"][mode]["tokens"] > 0
    assert report["prefix_caching"]["tokens_cached"] > 0


def test_bench_engine_memory_toy_shapes(tiny_model_dir, tiny_openvino_dir, tmp_path):
    """scripts/bench_engine_memory.py: each mode in its own process, every step's phases read, the summary written."""
    out = tmp_path / "bench_engine_memory.json"
    subprocess.run([sys.executable, str(REPO / "scripts/bench_engine_memory.py"), "--model", str(tiny_model_dir),
                    "--steps", "2", "--batch", "1", "--seq", "48", "--rows", "2", "--new-tokens", "8",
                    "--modes", "heap,heap+trim", "--out", str(out)], check=True, cwd=REPO)
    report = json.loads(out.read_text())
    assert [m["mode"] for m in report["modes"]] == ["heap", "heap+trim"]
    for mode in report["modes"]:
        assert mode["malloc"]["mode"] == "heap" and len(mode["phases"]) == 2
        assert mode["adapter_updates"] == 2  # each step's adapter went to the engine (the rebuild measured)
        assert all(p["generate_gib"] > 0 for p in mode["phases"])
    assert set(report["summary"]) == {"heap", "heap+trim"}
