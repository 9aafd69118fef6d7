"""The `warmup` stage: where GRPO and SFT start. On the embedded profile a short LoRA SFT on the demos (the SFT
code): models/warmup is that adapter, which SFT continues and GRPO trains on; on the H100 profile warmup is off
and both start from the base model. Either way models/warmup/ holds `start.json`, which `models.artifact.resolve_start` reads:
{"start_from": "adapter" | "base", "base": DIR, "adapter": DIR|null}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.models.artifact import write_start
from termagent.params import trl_knobs
from termagent.train.sft import SFT_RESERVED, SFTParams


@dataclass
class WarmupParams(SFTParams):
    """SFTParams with the warmup's own defaults: the demos alone, one full epoch in a family-balanced order, a
    higher rate, nothing to skip."""

    datasets: list[str] = field(default_factory=lambda: ["data/sft/demos.jsonl"])
    max_steps: int = -1  # trl.num_train_epochs over every demo (one epoch: ceil(demos / 8) steps)
    order: str = "family"  # every optimizer step holds the families in proportion (sft.family_balanced)
    trl: dict[str, Any] = field(default_factory=lambda: {
        "num_train_epochs": 1.0, "learning_rate": 1e-3, "lr_scheduler_type": "cosine", "warmup_steps": 0.05,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "logging_steps": 2},
        metadata=trl_knobs("SFTConfig", SFT_RESERVED))
    skip_seen_by: str | None = None
    enabled: bool = True  # on: a short SFT on the demos; off: GRPO starts from the base model


OFF_REASON = "warmup.enabled false: no warmup model was trained; GRPO starts from the base model"


def write_disabled(out_dir: str | Path, *, base_dir: str | Path, metrics_dir: str | Path,
                   curves_png: str | Path | None = None) -> dict:
    """The warmup stage with `warmup.enabled: false` (the H100 profile): every output dvc.yaml declares, none
    of them a metric of training that did not happen. `out_dir`/start.json names the base GRPO starts from;
    metrics_dir/train.json says `enabled: false` and why; metrics_dir/dvclive holds only skipped.json (no
    curve); the curves PNG says the warmup is off. eval@warmup then evaluates nothing (the base is eval@base's)
    and the report leaves the warmup row out, saying why. Returns the start record."""
    from termagent.train.common import plot_curves, write_stage_metrics

    record = write_start(out_dir, base_dir=base_dir, adapter=False)
    metrics_dir = Path(metrics_dir)
    with atomic.staged_dir(metrics_dir / "dvclive") as staging:  # no curve of an earlier enabled run survives
        atomic.write_json(staging / "skipped.json", {"skipped": OFF_REASON, "start": record})
    plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", "warmup: off", note=OFF_REASON)
    write_stage_metrics(metrics_dir / "train.json", "warmup", enabled=False, skipped=OFF_REASON, start=record)
    return record
