"""Multi-turn SFT with TRL's SFTTrainer (the `sft` and `warmup` stages): assistant-only loss on
conversations in the OpenThoughts-Agent-v1-SFT / Terminus-2 shape, LoRA, cosine schedule with warmup,
explicit max length (truncation keeps the start), packing off, bf16 only where supported.

Data (`SFTParams.datasets`): local JSONL files and/or Hugging Face datasets "ID@REVISION" (a pinned commit;
the H100 profile's OpenThoughts-Agent-v1-SFT). Rows hold `conversations` (or `messages`) as {role, content}
(ShareGPT {from, value} is mapped); rows in the rollout schema (prompt messages + completion, e.g. the
API-ranked SFT set) are turned into conversations.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termagent.train.augment import with_renamed_copies
from termagent.train.common import (
    LoraParams,
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
from termagent.train.copy_monitor import HELD_OUT_SEED, CopyMonitor, copy_accuracy, held_out_windows

log = logging.getLogger(__name__)

_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
          "tool": "tool"}


@dataclass
class SFTParams:
    # Local JSONL paths (conversations or rollout rows) and/or "hf_id@revision" (a 40-hex commit).
    datasets: list[str] = field(default_factory=lambda: ["data/sft/demos.jsonl"])
    max_length: int = 8192  # tokens per conversation; longer ones are cut at the end (TRL keep_start)
    num_train_epochs: float = 2.0  # DESIGN §4
    max_steps: int = -1  # > 0 overrides epochs (smoke runs)
    learning_rate: float = 2e-5  # DESIGN §4
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1  # 10% warmup (passed as a fractional warmup_steps, transformers 5)
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 16
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    logging_steps: int = 1
    seed: int = 0
    lora: LoraParams = field(default_factory=LoraParams)
    # Train every weight and save a full model instead of a LoRA adapter: for the random-init tiny model,
    # whose frozen random weights a low-rank update barely moves (the embedded warmup; its output is then
    # the base the later stages put their standard PEFT adapters on). Off: a LoRA adapter (a real model).
    full_finetune: bool = False
    # CUDA only (training_kwargs): recompute each layer in the backward instead of keeping its activations. Off
    # saves the recompute (~1/4 of a step) where the memory plan says it fits (termagent/train/memory.py:
    # the 8B at 8,192 tokens needs ~115 GiB without it: an H200, not an 80 GB H100)
    gradient_checkpointing: bool = True
    max_examples: int = 0  # 0: all; N: the first N rows after loading (smoke runs)
    # Short-context curriculum (off at 0 epochs): before the whole conversations, `window_epochs` passes over
    # every assistant turn alone with only the last `window_context` tokens before it, `window_batch_size` at a
    # time. A random-init model learns the reply's structure and copying from the task text (which ends the
    # prompt) from these short sequences at a fraction of the cost; the whole-conversation pass then adapts it
    # to the long prompt. Sequence-length warmup, as in pre-training; a pretrained model needs none.
    window_epochs: float = 0.0
    window_context: int = 256
    window_batch_size: int = 16
    window_learning_rate: float | None = None  # None: learning_rate
    # The window phase's schedule (None: lr_scheduler_type). `constant_with_warmup` keeps the high rate through
    # the phase: copying a name from the task (an induction circuit) appears abruptly after ~900 steps at a
    # constant rate in scripts/copy_probe.py, later than a cosine schedule has left the rate high.
    window_lr_scheduler_type: str | None = None
    # Batches of similar lengths (transformers' LengthGroupedSampler: 50 batches drawn at random, sorted by
    # length, cut into batches): the window phase's random batches of 16 are 1.79x their real tokens once
    # padded, length-grouped ones 1.09x (the embedded demos) - 2.4x faster windows. But a length-sorted batch
    # holds one template (family, turn) many times: the embedded warmup then stopped copying the task's words
    # (7 % against 56-77 %, metrics/experiments/warmup_grouped_constant.json), so the embedded profile keeps it off.
    group_by_length: bool = False
    # Length-balanced micro-batches with the optimizer step unchanged (transformers' BatchRebalanceSampler): each
    # step still draws `window_batch_size` windows at random, sorts them by length and splits them into this
    # many micro-batches of balanced padded cost, whose gradients accumulate; the loss is normalised by the
    # step's label tokens (`num_items_in_batch`), so the step is the random batch's step, templates mixed as
    # before. Padding of the embedded windows: 1.79x their tokens in random batches of 16, 1.04x in 4
    # micro-batches (1.16x in 2, 1.01x in 8). 1: off (one padded batch per step). The sampler shuffles with
    # transformers' fixed seed (42), not `seed`: the window order does not follow `seed` when this is on.
    window_micro_batches: int = 1
    # Renamed copies of each conversation (termagent.train.augment): the generated families' names replaced
    # through a fresh random bijection per copy, so names can only be predicted by copying them from the
    # task text. 0: off (real data, e.g. OpenThoughts, has no shared name pools).
    rename_copies: int = 0
    # Window passes with a fresh renaming each: pass p trains on the conversations and `rename_copies` copies
    # drawn with seed + p, so no renamed window is ever seen twice and a name cannot be memorised, only
    # copied (off: every pass repeats the same copies). The whole-conversation pass uses pass 0's copies.
    rename_each_pass: bool = False
    # Held-out copy accuracy in the window phase (termagent.train.copy_monitor): every this many optimizer
    # steps, the greedy accuracy on the `_NN` number tokens of held-out renamed windows that a one-back copy
    # predicts, logged as copy/number_accuracy (0: off). With `window_copy_target` > 0 the window phase ends at
    # the first measurement at or above it, `window_epochs` being the budget: the copy emerges at a
    # run-dependent step (1,566 steps copied 47 of 94 numbers in one run, 1 of 94 in its rerun).
    window_copy_eval_every: int = 0
    window_copy_target: float = 0.0
    window_copy_windows: int = 256  # held-out windows measured (those with at least one copy target)

    def __post_init__(self):
        if not self.datasets:
            raise ValueError("datasets must list at least one JSONL path or hf_id@revision")
        if self.max_length < 16:
            raise ValueError(f"max_length must be >= 16, got {self.max_length}")
        if self.rename_copies < 0:
            raise ValueError(f"rename_copies must be >= 0, got {self.rename_copies}")
        if self.window_epochs < 0 or self.window_context < 0 or self.window_batch_size < 1:
            raise ValueError("window_epochs and window_context must be >= 0 and window_batch_size >= 1, got "
                             f"{self.window_epochs}, {self.window_context}, {self.window_batch_size}")
        if self.window_micro_batches < 1 or self.window_batch_size % self.window_micro_batches:
            raise ValueError(f"window_micro_batches must be >= 1 and divide window_batch_size "
                             f"({self.window_batch_size}), got {self.window_micro_batches}")
        if self.window_copy_eval_every < 0 or not 0.0 <= self.window_copy_target <= 1.0 or self.window_copy_windows < 1:
            raise ValueError("window_copy_eval_every must be >= 0, window_copy_target in [0, 1] and "
                             f"window_copy_windows >= 1, got {self.window_copy_eval_every}, "
                             f"{self.window_copy_target}, {self.window_copy_windows}")
        if self.window_copy_target and not self.window_copy_eval_every:
            raise ValueError("window_copy_target needs window_copy_eval_every > 0 (the copy is measured then)")
        if self.window_micro_batches > 1 and self.group_by_length:
            raise ValueError("window_micro_batches > 1 and group_by_length are two samplers: choose one")


# -- data ---------------------------------------------------------------------------------------------------
def _message(m: dict, where: str) -> dict:
    role = m.get("role", m.get("from"))
    content = m.get("content", m.get("value"))
    if role not in _ROLES or not isinstance(content, str):
        raise ValueError(f"{where}: a message needs role/content (or from/value) strings, got {sorted(m)}")
    return {"role": _ROLES[role], "content": content}


def to_conversation(row: dict, where: str) -> list[dict]:
    """One dataset row -> [{role, content}, ...]: `conversations`/`messages`, or the rollout schema
    (`prompt` messages + `completion` text or messages)."""
    for key in ("conversations", "messages"):
        if isinstance(row.get(key), list):
            return [_message(m, where) for m in row[key]]
    if "prompt" in row and "completion" in row:
        prompt = row["prompt"]
        prompt = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        completion = row["completion"]
        completion = [{"role": "assistant", "content": completion}] if isinstance(completion, str) else completion
        return [_message(m, where) for m in [*prompt, *completion]]
    raise ValueError(f"{where}: no `conversations`, `messages` or `prompt`+`completion` field (keys: {sorted(row)})")


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
    return rows


def load_conversations(sources: list[str]) -> tuple[list[list[dict]], dict[str, int]]:
    """All conversations of `sources`, and how many came from each. A source is an existing local file,
    else "hf_id@revision" (a pinned 40-hex commit); anything else fails, naming the source."""
    conversations: list[list[dict]] = []
    counts: dict[str, int] = {}
    for source in sources:
        path = Path(source)
        if path.is_file():
            rows = _read_jsonl(path)
        elif source.endswith(".jsonl") or source.startswith((".", "/", "data/")):
            raise FileNotFoundError(f"sft dataset {source}: no such file (produced by an earlier stage?)")
        else:
            hf_id, _, revision = source.partition("@")
            if len(revision) != 40 or any(c not in "0123456789abcdef" for c in revision):
                raise ValueError(f"sft dataset {source!r}: a Hub dataset must be pinned as ID@<40-hex commit>")
            from datasets import load_dataset

            rows = list(load_dataset(hf_id, revision=revision, split="train"))
        convs = []
        for index, row in enumerate(rows):
            conv = to_conversation(row, f"{source}[{index}]")
            if not any(m["role"] == "assistant" for m in conv):
                raise ValueError(f"{source}[{index}]: no assistant turn (nothing to learn)")
            convs.append(conv)
        counts[source] = len(convs)
        conversations.extend(convs)
    return conversations, counts


# -- chat template --------------------------------------------------------------------------------------------
def check_chat_template(tokenizer) -> None:
    """Fail loudly unless the tokenizer carries a template TRL can mask assistant turns with: the project's
    (termagent.models.templates, installed by load_tokenizer), with `{% generation %}` markers."""
    from termagent.models.templates import has_generation_markers

    if not has_generation_markers(tokenizer.chat_template):
        raise ValueError("the tokenizer's chat template has no {% generation %} markers: load it with "
                         "termagent.train.common.load_tokenizer (the project's template), or set "
                         "base_model.chat_template_path for a model family the project does not know")


def training_template(tokenizer) -> str:
    """The template TRL's SFTTrainer trains with for this tokenizer (assistant_only_loss): the tokenizer's own
    when it has generation markers, else the training template TRL swaps in (as SFTTrainer.__init__ decides)."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    return template if has_generation_markers(template) else get_training_chat_template(tokenizer)


def assistant_token_fraction(tokenizer, conversations: list[list[dict]], max_length: int) -> dict[str, Any]:
    """Tokens per conversation and the share that carries loss (assistant turns), after truncation, counted with
    the template TRL trains with (training_template)."""
    template = training_template(tokenizer)
    total = trained = truncated = 0
    for conv in conversations:
        out = tokenizer.apply_chat_template(conv, tokenize=True, return_dict=True, chat_template=template,
                                            return_assistant_tokens_mask=True)
        ids, mask = out["input_ids"], out["assistant_masks"]
        truncated += len(ids) > max_length
        total += min(len(ids), max_length)
        trained += sum(mask[:max_length])
    return {"tokens": total, "assistant_tokens": trained, "truncated_conversations": truncated}


def context_windows(tokenizer, conversations: list[list[dict]], context: int) -> list[dict]:
    """One pre-tokenized example per assistant turn: the turn's tokens and at most `context` tokens before
    it, the loss on that turn only ({input_ids, assistant_masks}, the columns SFTTrainer takes as is)."""
    examples = []
    for conv in conversations:
        out = tokenizer.apply_chat_template(conv, tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=True)
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        end = 0
        while True:
            start = next((i for i in range(end, len(mask)) if mask[i]), None)
            if start is None:
                break
            end = next((i for i in range(start, len(mask)) if not mask[i]), len(mask))
            left = max(0, start - context)
            examples.append({"input_ids": ids[left:end], "assistant_masks": [0] * (start - left) + [1] * (end - start)})
    return examples


def window_conversations(originals: list[list[dict]], renamed: list[list[dict]],
                         params: SFTParams) -> tuple[list[list[dict]], float, int]:
    """The window phase's conversations, its epochs over them and how many renamed sets they hold.
    `renamed`: the originals with their `rename_copies` copies (seed `params.seed`). Without
    `rename_each_pass`: that set, `window_epochs` times. With it: one set per pass, ceil(window_epochs) of
    them (pass p renamed with seed + p), each seen once; a fractional last pass is that share of the whole."""
    if not (params.rename_each_pass and params.rename_copies) or params.window_epochs <= 1:
        return renamed, params.window_epochs, 1
    passes = math.ceil(params.window_epochs)
    more = [c for p in range(1, passes) for c in with_renamed_copies(originals, params.rename_copies, params.seed + p)]
    return renamed + more, params.window_epochs / passes, passes


def _trained_state(model, full: bool) -> dict:
    """CPU copies of the weights training should change: all of them (full fine-tuning) or the adapter's."""
    if full:
        return {name: p.detach().float().cpu().clone() for name, p in model.named_parameters()}
    return adapter_state(model)


# -- training -----------------------------------------------------------------------------------------------
def _fit(model, dataset, tokenizer, params: SFTParams, metrics_dir: Path, *, stage: str, epochs: float,
         batch_size: int, accumulation: int, max_length: int, learning_rate: float, lr_scheduler_type: str,
         step_offset: int = 0, micro_batches: int = 1, monitor_windows: list[dict] | None = None):
    """One SFTTrainer run over `dataset` (conversations, or pre-tokenized windows); its dvclive series
    continue those of an earlier run from `step_offset`. `micro_batches` > 1: each optimizer step's
    `batch_size` x `accumulation` random examples are split into length-balanced micro-batches (transformers'
    `batch_rebalance` sampling) whose gradients accumulate. `monitor_windows`: held-out copy windows measured
    every `window_copy_eval_every` steps (copy_monitor.CopyMonitor, which may end the run at its target).
    Returns (trainer, train result, the monitor or None)."""
    from trl import SFTConfig, SFTTrainer

    if micro_batches > 1:  # SFTParams checked that it divides the batch
        batch_size, accumulation = batch_size // micro_batches, accumulation * micro_batches
        sampling = "batch_rebalance"
    else:
        sampling = "group_by_length" if params.group_by_length else "random"

    scratch = tempfile.mkdtemp(prefix=f"termagent-{stage}-")  # TRL wants an output dir; nothing is saved there
    config = SFTConfig(**training_kwargs(
        output_dir=scratch, seed=params.seed, logging_steps=params.logging_steps,
        gradient_checkpointing=params.gradient_checkpointing, gradient_checkpointing_kwargs={"use_reentrant": False},
        num_train_epochs=epochs, max_steps=params.max_steps,
        learning_rate=learning_rate, lr_scheduler_type=lr_scheduler_type,
        warmup_steps=params.warmup_ratio, per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation, weight_decay=params.weight_decay,
        max_grad_norm=params.max_grad_norm, max_length=max_length, truncation_mode="keep_start",
        # Conversations: TRL masks all but the assistant turns. Pre-tokenized windows carry `assistant_masks`,
        # which TRL folds into the labels as they are (and refuses assistant_only_loss for).
        packing=False, assistant_only_loss="messages" in dataset.column_names,
        train_sampling_strategy=sampling,
    ))
    live = dvclive_callback(metrics_dir, step_offset=step_offset)
    callbacks, monitor = [live], None
    if monitor_windows:
        monitor = CopyMonitor(monitor_windows, every=params.window_copy_eval_every,
                              target=params.window_copy_target, pad_id=tokenizer.pad_token_id or 0,
                              live=live.live, step_offset=step_offset)
        callbacks.append(monitor)
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         callbacks=callbacks)
    try:
        result = trainer.train()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return trainer, result, monitor


def _run_summary(log_history: list[dict], seconds: float) -> dict[str, Any]:
    """First and last logged loss and trained tokens per second of one trainer run."""
    losses = [h["loss"] for h in log_history if "loss" in h]
    tokens = max([h.get("num_tokens", 0) for h in log_history] or [0])
    return {"first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "tokens_per_s": round(tokens / seconds, 1) if seconds else None}


def train_sft(base_dir: str | Path, out_dir: str | Path, params: SFTParams, *, metrics_dir: str | Path,
              stage: str = "sft", curves_png: str | Path | None = None, init_adapter: str | Path | None = None,
              conversations: list[list[dict]] | None = None) -> dict[str, Any]:
    """Train a LoRA adapter on `params.datasets` (or the given conversations); save it to `out_dir`;
    write `<metrics_dir>/train.json` and the dvclive curves; return the metrics."""
    from datasets import Dataset
    from peft import get_peft_model

    timer = StageTimer()
    seed_everything(params.seed)
    metrics_dir = Path(metrics_dir)
    with timer.phase("load"):
        counts: dict[str, int] = {"<given>": len(conversations)} if conversations is not None else {}
        if conversations is None:
            conversations, counts = load_conversations(params.datasets)
        if params.max_examples:
            conversations = conversations[: params.max_examples]
        if not conversations:
            raise ValueError(f"sft: no training conversation in {params.datasets}")
        originals = conversations
        if params.rename_copies:
            counts = {**counts, "renamed_copies": params.rename_copies * len(conversations)}
            conversations = with_renamed_copies(conversations, params.rename_copies, params.seed)
        tokenizer = load_tokenizer(base_dir)
        check_chat_template(tokenizer)
        if params.full_finetune and init_adapter is not None:
            raise ValueError("full_finetune trains a full model: it cannot start from an adapter (init_adapter)")
        if not params.full_finetune:
            from termagent.train.memory import check_before_loading

            check_before_loading(stage, base_dir, seq_len=params.max_length,
                                 micro_batch=params.per_device_train_batch_size,
                                 checkpointing=params.gradient_checkpointing, lora_r=params.lora.r,
                                 lora_targets=list(params.lora.target_modules),
                                 knobs=f"{stage}.max_length or per_device_train_batch_size, or set "
                                       f"{stage}.gradient_checkpointing: true")
        model = load_model(base_dir, init_adapter, trainable=True)
        if init_adapter is None and not params.full_finetune:
            model = get_peft_model(model, params.lora.to_peft())
        data_stats = assistant_token_fraction(tokenizer, conversations, params.max_length)
        if not data_stats["assistant_tokens"]:
            raise ValueError(f"{stage}: no assistant token is left within {stage}.max_length={params.max_length} "
                             f"({data_stats['truncated_conversations']} of {len(conversations)} conversations are "
                             "longer and keep their start): raise max_length")
        before = _trained_state(model, params.full_finetune)
    window_steps, window_metrics, monitor_windows = 0, None, None
    if params.window_epochs > 0:
        with timer.phase("load"):
            convs, window_epochs, passes = window_conversations(originals, conversations, params)
            windows = context_windows(tokenizer, convs, params.window_context)
            monitor_windows = held_out_windows(
                tokenizer, originals, context=params.window_context, seed=params.seed + HELD_OUT_SEED,
                max_windows=params.window_copy_windows) if params.window_copy_eval_every else None
            if params.window_copy_target and not monitor_windows:
                raise ValueError(f"{stage}: window_copy_target is set but no conversation of {params.datasets} "
                                 "has a `word_NN` stem a renamed window could copy (no held-out copy target)")
        with timer.phase("windows"):
            trainer, _, monitor = _fit(model, Dataset.from_list(windows), tokenizer, params, metrics_dir, stage=stage,
                              epochs=window_epochs, batch_size=params.window_batch_size,
                              accumulation=1, max_length=params.window_context + params.max_length,
                              learning_rate=params.window_learning_rate or params.learning_rate,
                              lr_scheduler_type=params.window_lr_scheduler_type or params.lr_scheduler_type,
                              micro_batches=params.window_micro_batches, monitor_windows=monitor_windows)
        model, window_steps = trainer.model, trainer.state.global_step
        window_metrics = {"examples": len(windows), "steps": window_steps, "epochs": params.window_epochs,
                          "renamed_sets": passes if params.rename_copies else 0,
                          "tokens": sum(len(w["input_ids"]) for w in windows),
                          **_run_summary(trainer.state.log_history, timer.phases["windows"]),
                          **(monitor.summary() if monitor else {})}
    dataset = Dataset.from_list([{"messages": c} for c in conversations])
    with timer.phase("train"):
        trainer, result, _ = _fit(model, dataset, tokenizer, params, metrics_dir, stage=stage,
                               epochs=params.num_train_epochs, batch_size=params.per_device_train_batch_size,
                               accumulation=params.gradient_accumulation_steps, max_length=params.max_length,
                               learning_rate=params.learning_rate, lr_scheduler_type=params.lr_scheduler_type,
                               step_offset=window_steps)
    if window_metrics is not None and monitor_windows:  # the copy after the whole-conversation pass too
        final = copy_accuracy(trainer.model, monitor_windows, pad_id=tokenizer.pad_token_id or 0)
        window_metrics["copy_accuracy_after_conversations"] = None if final is None else round(final, 4)
    changed = require_update(stage, before, _trained_state(trainer.model, params.full_finetune),
                             trainer.state.global_step)
    with timer.phase("save"):
        manifest = {"stage": stage, "base": str(base_dir), "init_adapter": str(init_adapter) if init_adapter else None,
                    "params": asdict(params), "datasets": counts}
        save_adapter(trainer.model, tokenizer, out_dir, manifest=manifest)
    metrics = {
        "n_conversations": len(conversations), "datasets": counts, **data_stats,
        "global_steps": trainer.state.global_step, "epochs": result.metrics.get("epoch", params.num_train_epochs),
        "train_loss": result.training_loss, **_run_summary(trainer.state.log_history, timer.phases["train"]),
        "adapter_tensors_changed": changed, "adapter_tensors": len(before),
    }
    if window_metrics is not None:
        metrics["windows"] = window_metrics
    write_stage_metrics(metrics_dir / "train.json", stage, timer, **metrics)
    plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", f"{stage}: training curves")
    return metrics
