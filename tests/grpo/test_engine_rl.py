"""GRPO whose rollouts run on the OpenVINO engine with the trainer's live LoRA (engine.rl, termagent.train.
engine_rollouts), against real containers: the engine gets the adapter after every optimizer step, the trained
tokens are the engine's, and TRL's truncated importance sampling measures and corrects the engine/trainer gap."""

from __future__ import annotations

import pytest

from termagent.policy.openvino import EngineConfig
from termagent.rollouts import iter_jsonl
from termagent.train.grpo import GRPOPaths, train_grpo
from termagent.train.single_turn import EnvConfig
from tests.conftest import export_openvino_ir
from tests.grpo.test_train import small_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_grpo_rollouts_on_the_engine_with_live_adapters(tmp_path, warm_model_dir, warm_adapter, tasks, grpo_sandbox):
    export_openvino_ir(warm_model_dir)
    paths = GRPOPaths(warmup=warm_adapter, out=tmp_path / "models/grpo", rollouts_dir=tmp_path / "rollouts",
                      checkpoints=tmp_path / "ckpt", metrics_dir=tmp_path / "metrics")
    engine = EngineConfig(rl=True, precision="f32", adapter_mode="runtime", is_correction=True)
    metrics = train_grpo(small_config(temperature=0.7), paths, tasks=tasks, sandbox=grpo_sandbox,
                         env_config=EnvConfig(), progress=False, engine=engine)
    assert metrics["steps"] == 2 and metrics["adapter_delta_l2"] > 0
    # TRL's importance-sampling metrics exist only when it generated on the engine and recomputed the logprobs;
    # the engine's logprobs at temperature 0.7 (its logits-scaled IR) are the trainer's quantity: the f32 gap is small
    gaps, ratios = _curve(paths.metrics_dir, "sampling_logp_difference/mean"), _curve(
        paths.metrics_dir, "importance_sampling_ratio/mean")
    assert len(gaps) == 2 and all(0 <= g < 0.05 for g in gaps), gaps
    assert all(0.5 < r < 2.0 for r in ratios), ratios
    steps = list(iter_jsonl(paths.rollouts_dir / "steps.jsonl"))
    assert len(steps) == 2


def _curve(metrics_dir, name: str) -> list[float]:
    """One dvclive curve of the stage (metrics_dir/dvclive/plots/metrics/.../<name>.tsv), its values by step."""
    [tsv] = [p for p in metrics_dir.rglob("*.tsv") if p.as_posix().endswith(name + ".tsv")]
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
    return [float(r[-1]) for r in rows]
