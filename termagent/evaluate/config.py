"""The `eval:` section of params.yaml, typed. Built by stages/eval.py; the library takes its parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class HarborConfig:
    dataset: str = "terminal-bench@2.0"
    agent: str = "terminus-2"
    n_concurrent: int = 4
    temperature: float = 0.7
    max_input_tokens: int = 24000
    max_output_tokens: int = 8192
    jobs_dir: str = "data/harbor_jobs"  # <jobs_dir>/<model>/<job name>: kept between runs, so a rerun resumes
    # trials that errored outside the model (not its 0: Harbor's own classification, termagent/evaluate/harbor.py),
    # as a share of all trials, above which the eval fails instead of scoring the rest
    max_error_rate: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise ValueError(f"eval.harbor.max_error_rate must be within [0, 1], got {self.max_error_rate}")


@dataclass(frozen=True)
class TB1Config:
    dataset: str = "terminal-bench-core==0.1.1"
    agent: str = "terminus-2"
    n_concurrent: int = 4
    temperature: float = 0.7
    runs_dir: str = "data/tb1_runs"


@dataclass(frozen=True)
class EvalConfig:
    backend: Literal["local", "harbor", "tb1"] = "local"
    # the task index's held-out groups evaluated (never trained on); each is reported on its own (by_split)
    split: list[str] | str = field(default_factory=lambda: ["eval", "eval_id", "eval_ood"])  # a str: one group
    # model -> the groups its eval stage evaluates (the eval@<model> stages iterate over it); a model not listed
    # gets `split`
    models: dict[str, list[str]] = field(default_factory=lambda: {
        "base": ["eval", "eval_id", "eval_ood"], "warmup": ["eval_id"], "grpo": ["eval_id"], "sft": ["eval_id"],
        "dpo": ["eval_id"], "mt_grpo": ["eval", "eval_id", "eval_ood"]})
    # at most this many tasks per group (0 / absent: all), spread over families: keeps each eval to minutes
    max_per_split: dict[str, int] = field(default_factory=lambda: {"eval": 0, "eval_id": 48, "eval_ood": 4})
    attempts: int = 1
    concurrency: int = 8
    max_tasks: int = 0  # 0: every task of the split
    # openvino: the OpenVINO engine in-process (models/base_openvino, the `engine:` section) | hf: transformers
    # in-process | serve: `termagent serve` over HTTP
    policy: Literal["openvino", "hf", "serve"] = "openvino"
    # policy hf: concurrent trials' calls run as one batch (termagent.policy.batching), and each episode's
    # keys/values are kept between its calls (the last `prefix_cache` sequences; 0: off, termagent.policy.kv)
    batched: bool = True
    prefix_cache: int = 16
    harbor: HarborConfig = field(default_factory=HarborConfig)
    tb1: TB1Config = field(default_factory=TB1Config)

    def __post_init__(self) -> None:
        if isinstance(self.split, str):  # a single group, as params files before the split groups wrote it
            object.__setattr__(self, "split", [self.split])
        if not self.split:
            raise ValueError("eval.split must name at least one split group")
        if any(v < 0 for v in self.max_per_split.values()):
            raise ValueError(f"eval.max_per_split values must be >= 0, got {self.max_per_split}")
        for model, groups in self.models.items():
            if not groups:
                raise ValueError(f"eval.models.{model} must name at least one split group")
        if self.attempts < 1:
            raise ValueError(f"eval.attempts must be >= 1, got {self.attempts}")
        if self.concurrency < 1:
            raise ValueError(f"eval.concurrency must be >= 1, got {self.concurrency}")
        if self.max_tasks < 0:
            raise ValueError(f"eval.max_tasks must be >= 0, got {self.max_tasks}")
        if self.prefix_cache < 0:
            raise ValueError(f"eval.prefix_cache must be >= 0, got {self.prefix_cache}")


@dataclass(frozen=True)
class ReportConfig:
    base: str = "base"
    n_resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0


def groups_for(cfg: EvalConfig, model: str) -> list[str]:
    """The held-out groups `model` is evaluated on: eval.models[model], else eval.split."""
    return list(cfg.models.get(model) or cfg.split)
