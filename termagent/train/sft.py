"""Multi-turn SFT with TRL's SFTTrainer (the `sft` and `warmup` stages): assistant-only loss on
conversations in the OpenThoughts-Agent-v1-SFT / Terminus-2 shape, LoRA, cosine schedule with warmup,
explicit max length (truncation keeps the start), packing off, bf16 only where supported.

Data (`SFTParams.datasets`): local JSONL files and/or Hugging Face datasets "ID@REVISION" (a pinned commit;
the H100 profile's OpenThoughts-Agent-v1-SFT). Rows hold `conversations` (or `messages`) as {role, content}
(ShareGPT {from, value} is mapped); rows in the rollout schema (prompt messages + completion, e.g. the
API-ranked SFT set) are turned into conversations.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termagent.params import trl_knobs
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

log = logging.getLogger(__name__)

_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
          "tool": "tool"}


# What _fit sets itself: the typed fields below and these; the rest of SFTConfig is `sft.trl`'s.
SFT_RESERVED = ("output_dir", "data_seed", "gradient_checkpointing_kwargs", "truncation_mode", "packing",
                "assistant_only_loss", "train_sampling_strategy")
ORDERS = ("random", "family")


@dataclass
class SFTParams:
    # Local JSONL paths (conversations or rollout rows) and/or "hf_id@revision" (a 40-hex commit).
    datasets: list[str] = field(default_factory=lambda: ["data/sft/demos.jsonl", "data/datasets/rft_sft.jsonl",
                                                         "data/datasets/api_sft.jsonl"])
    max_length: int = 1536  # tokens per conversation; longer ones are cut at the end (TRL keep_start)
    max_steps: int = 8  # > 0 overrides epochs; -1: trl.num_train_epochs decide
    # the order conversations are trained in: "random" (TRL's shuffling sampler) or "family" (planned_examples:
    # each task family's conversations spread evenly over the run, read in that order)
    order: str = "random"
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 8
    # TRL's own knobs, straight into trl.SFTConfig (warmup_steps < 1 is a fraction of the run)
    trl: dict[str, Any] = field(default_factory=lambda: {
        "num_train_epochs": 1.0, "learning_rate": 5e-4, "lr_scheduler_type": "cosine", "warmup_steps": 0.05,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "logging_steps": 2},
        metadata=trl_knobs("SFTConfig", SFT_RESERVED))
    seed: int = 0
    lora: LoraParams = field(default_factory=lambda: LoraParams(r=16, alpha=32))
    # CUDA only (training_kwargs): recompute each layer in the backward instead of keeping its activations. Off
    # saves the recompute (~1/4 of a step) where the memory plan says it fits (termagent/train/memory.py:
    # the 8B at 8,192 tokens needs ~115 GiB without it: an H200, not an 80 GB H100)
    gradient_checkpointing: bool = True
    max_examples: int = 0  # 0: all; N: the first N rows after loading (smoke runs)
    # an adapter directory whose manifest lists the conversations it trained on (`trained_examples`): those are
    # left out here, so a stage continuing that adapter trains on what it has not seen (null: keep all)
    skip_seen_by: str | None = None

    def __post_init__(self):
        if not self.datasets:
            raise ValueError("datasets must list at least one JSONL path or hf_id@revision")
        if self.max_length < 16:
            raise ValueError(f"max_length must be >= 16, got {self.max_length}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")


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
    """All conversations of `sources`, and how many came from each (load_examples without the task ids)."""
    conversations, counts, _ = load_examples(sources)
    return conversations, counts


def load_examples(sources: list[str]) -> tuple[list[list[dict]], dict[str, int], list[str | None]]:
    """All conversations of `sources`, how many came from each, and each one's `task_id` (None where the row
    has none). A source is an existing local file, else "hf_id@revision" (a pinned 40-hex commit); anything
    else fails, naming the source."""
    conversations: list[list[dict]] = []
    counts: dict[str, int] = {}
    task_ids: list[str | None] = []
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
        task_ids.extend(row.get("task_id") if isinstance(row.get("task_id"), str) else None for row in rows)
    return conversations, counts, task_ids


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


# -- training -----------------------------------------------------------------------------------------------
def _fit(model, dataset, tokenizer, params: SFTParams, metrics_dir: Path, *, stage: str):
    """One SFTTrainer run over `dataset` (conversations: TRL masks all but the assistant turns). Returns
    (trainer, train result)."""
    from trl import SFTConfig, SFTTrainer

    scratch = tempfile.mkdtemp(prefix=f"termagent-{stage}-")  # TRL wants an output dir; nothing is saved there
    config = SFTConfig(**training_kwargs(
        output_dir=scratch, seed=params.seed, gradient_checkpointing=params.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False}, max_steps=params.max_steps,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps, max_length=params.max_length,
        truncation_mode="keep_start", packing=False, assistant_only_loss=True,
        # `family`: planned_examples already ordered the conversations; TRL reads them in that order
        train_sampling_strategy="sequential" if params.order == "family" else "random", **params.trl))
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         callbacks=[dvclive_callback(metrics_dir)])
    try:
        result = trainer.train()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return trainer, result


def _run_summary(log_history: list[dict], seconds: float) -> dict[str, Any]:
    """First and last logged loss and trained tokens per second of one trainer run."""
    losses = [h["loss"] for h in log_history if "loss" in h]
    tokens = max([h.get("num_tokens", 0) for h in log_history] or [0])
    return {"first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "tokens_per_s": round(tokens / seconds, 1) if seconds else None}


def conversation_key(conversation: list[dict]) -> str:
    """A conversation's identity in manifests (`trained_examples`): sha256 of its canonical JSON, 16 hex."""
    return hashlib.sha256(json.dumps(conversation, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def seen_by(adapter_dir: str | Path) -> set[str]:
    """The conversation keys an adapter was trained on (its manifest's `trained_examples`)."""
    manifest = Path(adapter_dir) / "manifest.json"
    try:
        keys = json.loads(manifest.read_text())["trained_examples"]
    except (OSError, json.JSONDecodeError, KeyError) as e:
        raise ValueError(f"{manifest}: no list of trained_examples to skip ({e}); retrain that stage, or set "
                         "skip_seen_by: null") from None
    return set(keys)


# A generated task's id: `<family>-<4 digits>` (termagent.tasks.families.task_id; tests/tasks checks the two agree).
_GENERATED_ID = re.compile(r"(?P<family>[a-z0-9-]+)-\d{4}")


def example_group(task_id: str | None) -> str:
    """What `order: family` balances over: a generated task's family, `bundled` for any other task, `unknown`
    for a conversation without a task id (a Hub row)."""
    if task_id is None:
        return "unknown"
    match = _GENERATED_ID.fullmatch(task_id)
    return match["family"] if match else "bundled"


def family_balanced(conversations: list[list[dict]], groups: list[str], seed: int) -> list[list[dict]]:
    """Every conversation once, each group's (seeded shuffle) spread evenly over the sequence: its i-th of n
    sits at (i + offset) / n of the way, so any window of k conversations holds k x n / N +- 2 of a group of
    n (of N): every optimizer step sees the families in proportion, and so does a run cut short."""
    import random

    rng = random.Random(seed)
    by_group: dict[str, list[list[dict]]] = {}
    for conversation, group in zip(conversations, groups, strict=True):
        by_group.setdefault(group, []).append(conversation)
    keyed = []
    for group in sorted(by_group):
        members = by_group[group]
        rng.shuffle(members)
        offset = rng.random()
        keyed += [((i + offset) / len(members), rng.random(), c) for i, c in enumerate(members)]
    keyed.sort(key=lambda k: k[:2])
    return [c for _, _, c in keyed]


def planned_examples(conversations: list[list[dict]], params: SFTParams,
                     groups: list[str] | None = None) -> list[list[dict]]:
    """The conversations a run of `max_steps` consumes, in the order it trains on them: a seeded shuffle
    (`order: random`) or the family-balanced order of `groups` (`order: family`; see family_balanced), cut to
    max_steps x batch x accumulation (all of them when that is more than there are, or max_steps <= 0), so a
    stage knows, and records, exactly which conversations trained its adapter."""
    import random

    if params.order == "family":
        order = family_balanced(conversations, groups or ["unknown"] * len(conversations), params.seed)
    else:
        order = list(conversations)
        random.Random(params.seed).shuffle(order)
    if params.max_steps <= 0:
        return order
    budget = params.max_steps * params.per_device_train_batch_size * params.gradient_accumulation_steps
    return order[:budget] if budget < len(order) else order


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
        task_ids: list[str | None] = [None] * len(conversations or [])
        if conversations is None:
            conversations, counts, task_ids = load_examples(params.datasets)
        examples = list(zip(conversations, task_ids, strict=True))
        if params.max_examples:
            examples = examples[: params.max_examples]
        if params.skip_seen_by:
            seen = seen_by(params.skip_seen_by)
            before_skip = len(examples)
            examples = [(c, t) for c, t in examples if conversation_key(c) not in seen]
            counts["skipped_seen"] = before_skip - len(examples)
        groups = {conversation_key(c): example_group(t) for c, t in examples}
        conversations = planned_examples([c for c, _ in examples], params, [example_group(t) for _, t in examples])
        if not conversations:
            raise ValueError(f"sft: no training conversation in {params.datasets}")
        tokenizer = load_tokenizer(base_dir)
        check_chat_template(tokenizer)
        from termagent.train.memory import check_before_loading

        check_before_loading(stage, base_dir, seq_len=params.max_length,
                             micro_batch=params.per_device_train_batch_size,
                             checkpointing=params.gradient_checkpointing, lora_r=params.lora.r,
                             lora_targets=list(params.lora.target_modules),
                             knobs=f"{stage}.max_length or per_device_train_batch_size, or set "
                                   f"{stage}.gradient_checkpointing: true")
        model = load_model(base_dir, init_adapter, trainable=True)
        if init_adapter is None:
            model = get_peft_model(model, params.lora.to_peft())
        data_stats = assistant_token_fraction(tokenizer, conversations, params.max_length)
        if not data_stats["assistant_tokens"]:
            raise ValueError(f"{stage}: no assistant token is left within {stage}.max_length={params.max_length} "
                             f"({data_stats['truncated_conversations']} of {len(conversations)} conversations are "
                             "longer and keep their start): raise max_length")
        before = adapter_state(model)
    dataset = Dataset.from_list([{"messages": c} for c in conversations])
    with timer.phase("train"):
        trainer, result = _fit(model, dataset, tokenizer, params, metrics_dir, stage=stage)
    changed = require_update(stage, before, adapter_state(trainer.model), trainer.state.global_step)
    with timer.phase("save"):
        manifest = {"stage": stage, "base": str(base_dir), "init_adapter": str(init_adapter) if init_adapter else None,
                    "params": asdict(params), "datasets": counts,
                    "trained_examples": sorted(conversation_key(c) for c in conversations)}
        save_adapter(trainer.model, tokenizer, out_dir, manifest=manifest)
    metrics = {
        "n_conversations": len(conversations), "datasets": counts, **data_stats, "order": params.order,
        "conversations_by_group": dict(sorted(Counter(groups[conversation_key(c)] for c in conversations).items())),
        "global_steps": trainer.state.global_step, "epochs": result.metrics.get("epoch", params.trl.get("num_train_epochs")),
        "train_loss": result.training_loss, **_run_summary(trainer.state.log_history, timer.phases["train"]),
        "adapter_tensors_changed": changed, "adapter_tensors": len(before),
    }
    write_stage_metrics(metrics_dir / "train.json", stage, timer, **metrics)
    plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", f"{stage}: training curves")
    return metrics
