"""The `report:` section of params.yaml, typed: how every model is compared with the base."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportConfig:
    base: str = "base"  # the model every other is compared with
    n_resamples: int = 10000  # paired bootstrap resamples over tasks
    confidence: float = 0.95  # of the bootstrap interval
    seed: int = 0  # of the bootstrap
