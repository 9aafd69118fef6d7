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


# The final model: its eval is a stage of its own, `mt_grpo_eval` (`dvc repro mt_grpo_eval`); the other models'
# evals are one foreach over eval.models (`eval@<model>`).
FINAL_MODEL = "mt_grpo"
# The held-out group every local eval runs and every model's top-level `accuracy` is measured on: held-out instances
# of the training families (termagent.tasks.split), the same tasks for every model.
PRIMARY_GROUP = "eval_id"


def eval_stage(model: str) -> str:
    """The DVC stage that evaluates `model`: mt_grpo_eval for the final model, eval@<model> for the others."""
    return f"{FINAL_MODEL}_eval" if model == FINAL_MODEL else f"eval@{model}"


@dataclass(frozen=True)
class SampledConfig:
    """k sampled attempts per task at the RL temperature, beside the greedy one: a per-task solve rate in
    {0, 1/k, ..., 1} where greedy gives only 0 or 1, so a gain on a few tasks shows (metrics `sampled`)."""
    attempts: int = 2  # 0: greedy only
    temperature: float = 0.7  # the RL stages' (grpo.temperature, mt_grpo.temperature)
    # attempt a's episode sends seed + a (+ 1000 x its attempt number, termagent.agent.loop) with every call: the
    # same model, task and image replay the same sample; null: unseeded calls, which batch with the others
    seed: int | None = 0
    splits: list[str] = field(default_factory=lambda: [PRIMARY_GROUP])  # the groups sampled
    models: list[str] = field(default_factory=lambda: ["warmup", "grpo", "sft", "dpo", "mt_grpo"])  # not the base

    def __post_init__(self) -> None:
        if self.attempts < 0:
            raise ValueError(f"eval.sampled.attempts must be >= 0, got {self.attempts}")
        if self.attempts and self.temperature <= 0:
            raise ValueError(f"eval.sampled.temperature must be > 0 (sampled attempts), got {self.temperature}")

    def applies_to(self, model: str) -> bool:
        return self.attempts > 0 and model in self.models


@dataclass(frozen=True)
class EvalConfig:
    backend: Literal["local", "harbor", "tb1"] = "local"
    # the task index's held-out groups evaluated (never trained on); each is reported on its own (by_split)
    split: list[str] | str = field(default_factory=lambda: ["eval", "eval_id", "eval_ood"])  # a str: one group
    # model -> the groups its eval stage evaluates (the eval@<model> stages iterate over it: a model not listed has
    # no eval stage); the final model's groups are `final` (its stage is mt_grpo_eval)
    models: dict[str, list[str]] = field(default_factory=lambda: {
        "base": ["eval", "eval_id", "eval_ood"], "warmup": ["eval_id"], "grpo": ["eval_id"], "dpo": ["eval_id"]})
    final: list[str] = field(default_factory=lambda: ["eval", "eval_id", "eval_ood"])
    # at most this many tasks per group (0 / absent: all), spread over families: keeps each eval to minutes
    max_per_split: dict[str, int] = field(default_factory=lambda: {"eval": 0, "eval_id": 96, "eval_ood": 4})
    attempts: int = 1  # greedy (agent.temperature) attempts per task
    sampled: SampledConfig = field(default_factory=SampledConfig)
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
        if FINAL_MODEL in self.models:
            raise ValueError(f"eval.models.{FINAL_MODEL}: the final model's eval is the stage {eval_stage(FINAL_MODEL)}, "
                             "its groups are eval.final")
        for key, groups in [*((f"models.{m}", g) for m, g in self.models.items()), ("final", self.final)]:
            if PRIMARY_GROUP not in groups:
                raise ValueError(f"eval.{key} must include {PRIMARY_GROUP}: every model's top-level accuracy is "
                                 f"measured on it (the same tasks for every model), got {groups}")
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
    """The held-out groups `model` is evaluated on: eval.final for the final model, eval.models[model], else
    eval.split."""
    if model == FINAL_MODEL:
        return list(cfg.final)
    return list(cfg.models.get(model) or cfg.split)


def evaluated_models(cfg: EvalConfig) -> list[str]:
    """Every model an eval stage evaluates: eval.models' and the final model."""
    return [*cfg.models, FINAL_MODEL]
