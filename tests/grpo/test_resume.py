"""The rollout log survives a SIGKILL in the middle of a GRPO step, and the stage resumes from its last
checkpoint: the rerun finishes the remaining steps, and the logs hold each step exactly once (the
records of the step that died with the process move to *.orphaned.jsonl)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from termagent.rollouts import ReadStats, iter_jsonl, iter_rollouts

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def test_kill_mid_step_then_resume(tmp_path, warm_base_start, stage_inputs):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["grpo"].update(num_generations=4, per_device_train_batch_size=4,
                          gradient_accumulation_steps=1, max_steps=3, max_completion_length=48, concurrency=4,
                          use_vllm=False, max_prompt_length=4096,
                          max_resamples=0)  # one group a step: no dynamic sampling, so 4 rollouts a step
    params["grpo"]["trl"].update(save_steps=1, learning_rate=5e-4)
    params["grpo"]["lora"].update(r=8, alpha=16)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = {k: tmp_path / k for k in ("adapter", "rollouts", "ckpt", "metrics")}
    cmd = [sys.executable, str(REPO / "stages/grpo.py"), "--params", str(tmp_path / "params.yaml"),
           "--warmup", str(warm_base_start), "--tasks", str(stage_inputs["tasks"]), "--image", str(stage_inputs["image"]),
           "--out", str(out["adapter"]), "--rollouts-dir", str(out["rollouts"]), "--checkpoints", str(out["ckpt"]),
           "--metrics-dir", str(out["metrics"])]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rollouts = out["rollouts"] / "rollouts.jsonl"

    # Run until step 1's rollouts are logged after checkpoint-1 (step 1 is in flight), then SIGKILL.
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while not ((out["ckpt"] / "checkpoint-1" / "trainer_state.json").is_file() and _lines(rollouts) >= 8):
            if proc.poll() is not None:
                pytest.fail(f"the stage ended (rc {proc.returncode}) before it could be killed:\n"
                            f"{proc.stdout.read()[-3000:]}")
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    # The log the dead process left is readable: whole steps, at worst one torn last line.
    stats = ReadStats(str(rollouts))
    before = list(iter_rollouts(rollouts, stats))
    assert len(before) >= 8 and stats.n_malformed <= 1
    assert {r["training_step"] for r in before} >= {0, 1}

    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "resumed from" in done.stdout
    metrics = json.loads((out["metrics"] / "train.json").read_text())
    assert metrics["steps"] == 3 and Path(metrics["resumed_from"]).parent == out["ckpt"]

    after = list(iter_rollouts(rollouts))
    per_step = {}
    for r in after:
        per_step[r["training_step"]] = per_step.get(r["training_step"], 0) + 1
    assert per_step == {0: 4, 1: 4, 2: 4}
    assert [s["training_step"] for s in iter_jsonl(out["rollouts"] / "steps.jsonl")] == [0, 1, 2]
    resumed_at = int(Path(metrics["resumed_from"]).name.split("-")[1])
    orphaned = out["rollouts"] / "rollouts.orphaned.jsonl"
    if resumed_at == 1:  # step 1's first try died with the process: its rollouts are kept aside, not lost
        assert {r["training_step"] for r in iter_jsonl(orphaned)} == {1}
    assert (out["adapter"] / "adapter_config.json").is_file()
