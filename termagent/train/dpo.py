"""DPO from the SFT adapter (the `dpo` stage) with TRL's DPOTrainer and no separate reference copy.

The SFT adapter is loaded as a trainable PeftModel and passed with no `peft_config`: TRL then adds a frozen
"ref" adapter copied from "default", so the reference policy is the SFT policy (RESEARCH §4, rec. 9).
Rows (docs/design.md#datasets dpo schema: prompt, chosen, rejected) are conversational: the shared history goes in
`prompt` and only the first diverging assistant turn in chosen/rejected (anything after it would be
environment text that gets loss). Rows TRL would drop silently (prompt alone >= max_length) are dropped
here, counted and logged.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.params import trl_knobs
from termagent.train.common import (
    StageTimer,
    adapter_state,
    dvclive_callback,
    load_model,
    load_tokenizer,
    plot_curves,
    require_update,
    save_adapter,
    seed_everything,
    training_kwargs,
    write_stage_metrics,
)

log = logging.getLogger(__name__)


@dataclass
class DPOParams:
    # preference rows (prompt, chosen, rejected): the judge-filtered GRPO pairs and the sampled trajectories'
    # divergent-turn pairs (termagent/datasets/trajectories.py)
    datasets: list[str] = field(default_factory=lambda: ["data/datasets/dpo_filtered.jsonl",
                                                         "data/datasets/dpo_turns.jsonl"])
    skip_if_empty: bool = True  # empty input: True saves the SFT adapter unchanged, recorded; False fails loudly
    max_length: int = 3072  # prompt + completion tokens; rows whose prompt alone reaches it are dropped
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 4
    # TRL's own knobs, straight into trl.DPOConfig (beta: the pull towards the reference, the SFT policy;
    # loss_type: TRL loss names, ["sigmoid", "sft"] = RPO)
    trl: dict[str, Any] = field(default_factory=lambda: {
        "beta": 0.1, "loss_type": ["sigmoid"], "num_train_epochs": 1.0, "max_steps": -1, "learning_rate": 1e-4,
        "lr_scheduler_type": "cosine", "warmup_steps": 0.0, "max_grad_norm": 1.0, "logging_steps": 1},
        metadata=trl_knobs("DPOConfig", ("output_dir", "data_seed")))
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.datasets, str):
            raise TypeError("datasets must be a list of JSONL paths")


def _messages(value: Any, role: str = "assistant") -> list[dict]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return [{"role": m["role"], "content": m["content"]} for m in value]
    raise ValueError(f"expected a string or a list of {{role, content}} messages, got {type(value).__name__}")


def to_preference(row: dict, where: str) -> dict | None:
    """A docs/design.md#datasets dpo row -> {prompt, chosen, rejected} (conversational, one diverging assistant turn each).
    None when the two sides share everything or diverge outside an assistant turn."""
    for key in ("prompt", "chosen", "rejected"):
        if key not in row:
            raise ValueError(f"{where}: missing field {key!r} (docs/design.md#datasets dpo: prompt, chosen, rejected)")
    prompt = _messages(row["prompt"], role="user")
    chosen, rejected = _messages(row["chosen"]), _messages(row["rejected"])
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    if shared == len(chosen) or shared == len(rejected):
        return None
    if chosen[shared]["role"] != "assistant" or rejected[shared]["role"] != "assistant":
        return None
    return {"prompt": prompt + chosen[:shared], "chosen": [chosen[shared]], "rejected": [rejected[shared]]}


def load_preferences(path: str | Path, tokenizer, max_length: int) -> tuple[list[dict], dict[str, int]]:
    """The usable rows, and counts: read, no_divergence, prompt_too_long (what TRL would drop silently)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dpo dataset {path}: no such file (the datasets stage writes it)")
    counts: Counter = Counter()
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        counts["read"] += 1
        row = to_preference(json.loads(line), f"{path}:{number}")
        if row is None:
            counts["no_divergence"] += 1
            continue
        prompt_len = len(tokenizer.apply_chat_template(row["prompt"], tokenize=True, add_generation_prompt=True,
                                                       return_dict=True)["input_ids"])
        if prompt_len >= max_length:
            counts["prompt_too_long"] += 1
            log.warning("%s:%d: prompt of %d tokens >= max_length %d: dropped (TRL would drop it silently)",
                        path, number, prompt_len, max_length)
            continue
        rows.append(row)
    counts["used"] = len(rows)
    return rows, dict(counts)


def train_dpo(base_dir: str | Path, sft_adapter: str | Path, out_dir: str | Path, params: DPOParams, *,
              metrics_dir: str | Path, stage: str = "dpo", curves_png: str | Path | None = None) -> dict[str, Any]:
    """DPO on `params.datasets` starting from (and referenced to) the SFT adapter; saves the new adapter."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    timer = StageTimer()
    seed_everything(params.seed)
    metrics_dir = Path(metrics_dir)
    with timer.phase("load"):
        tokenizer = load_tokenizer(base_dir)
        rows, counts = [], Counter()
        for path in params.datasets:
            got, c = load_preferences(path, tokenizer, params.max_length)
            rows += got
            counts.update({f"{k}": v for k, v in c.items()})
            counts[f"used:{Path(path).name}"] = c.get("used", 0)
        counts = dict(counts)
        model = load_model(base_dir, sft_adapter, trainable=True)
    if not rows:
        message = (f"dpo: no usable preference pair in {params.datasets} ({counts}); the datasets stage found no "
                   "passing/failing pair")
        if not params.skip_if_empty:
            raise ValueError(message + ". Set dpo.skip_if_empty: true to pass the SFT adapter through.")
        log.warning(message + "; dpo.skip_if_empty: the SFT adapter passes through unchanged")
        save_adapter(model, tokenizer, out_dir, manifest={"stage": stage, "skipped": "empty input",
                                                            "init_adapter": str(sft_adapter), "pairs": counts})
        metrics = {"skipped": True, "pairs": counts, "adapter_tensors_changed": 0}
        write_stage_metrics(metrics_dir / "train.json", stage, timer, **metrics)
        # The stage's declared outputs exist either way: an empty curve log that says why, and a PNG.
        atomic.write_json(metrics_dir / "dvclive" / "skipped.json", {"skipped": "empty input", "pairs": counts})
        plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", f"{stage}: skipped",
                    note=f"no usable preference pair in {params.datasets}")
        return metrics
    before = adapter_state(model)
    scratch = tempfile.mkdtemp(prefix=f"termagent-{stage}-")  # TRL wants an output dir; nothing is saved there
    config = DPOConfig(**training_kwargs(
        output_dir=scratch, seed=params.seed, max_length=params.max_length,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps, **params.trl))
    trainer = DPOTrainer(model=model, ref_model=None, args=config, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer, callbacks=[dvclive_callback(metrics_dir)])
    with timer.phase("train"):
        try:
            result = trainer.train()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    changed = require_update(stage, before, adapter_state(trainer.model), trainer.state.global_step)
    with timer.phase("save"):
        save_adapter(trainer.model, tokenizer, out_dir,
                     manifest={"stage": stage, "base": str(base_dir), "init_adapter": str(sft_adapter),
                               "reference": "the SFT adapter (TRL 'ref' copy)", "params": asdict(params),
                               "pairs": counts})
    logs = [h for h in trainer.state.log_history if "loss" in h]
    metrics = {"skipped": False, "pairs": counts, "global_steps": trainer.state.global_step,
               "train_loss": result.training_loss,
               "first_loss": logs[0]["loss"] if logs else None, "last_loss": logs[-1]["loss"] if logs else None,
               "last_reward_accuracy": logs[-1].get("rewards/accuracies") if logs else None,
               "adapter_tensors_changed": changed, "adapter_tensors": len(before)}
    write_stage_metrics(metrics_dir / "train.json", stage, timer, **metrics)
    plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", f"{stage}: training curves")
    return metrics
