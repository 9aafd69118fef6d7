"""Real TRL steps on the tiny model: SFT (assistant-only loss mask, adapter changes, round trip),
DPO from the SFT adapter (the reference is the SFT policy; the adapter changes), warmup's start record."""

from __future__ import annotations

import json

import pytest
import torch

from termagent.train.common import LoraParams, adapter_state, load_model, load_tokenizer, read_dvclive_series
from termagent.train.dpo import DPOParams, to_preference, train_dpo
from termagent.train.sft import SFTParams, load_conversations, to_conversation, train_sft
from termagent.train.warmup import resolve_start, write_start

REPLY_1 = '{"analysis": "A fresh shell.", "plan": "List.", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}], "task_complete": false}'
REPLY_2 = '{"analysis": "Done.", "plan": "Finish.", "commands": [], "task_complete": true}'
CONVERSATION = [
    {"role": "user", "content": "Task:\nList the files in /app.\n\nCurrent terminal state:\nroot@sandbox:/app# "},
    {"role": "assistant", "content": REPLY_1},
    {"role": "user", "content": "New Terminal Output:\nroot@sandbox:/app# ls\ndata.csv\nroot@sandbox:/app# "},
    {"role": "assistant", "content": REPLY_2},
]
SMALL_LORA = LoraParams(r=4, alpha=8)


def small_sft(path, **kw) -> SFTParams:
    defaults = {'datasets': [str(path)], 'max_length': 512, 'max_steps': 3, 'gradient_accumulation_steps': 1,
                    'learning_rate': 5e-3, 'warmup_ratio': 0.0, 'lora': SMALL_LORA}
    defaults.update(kw)
    return SFTParams(**defaults)


@pytest.fixture(scope="module")
def demos_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "demos.jsonl"
    path.write_text("".join(json.dumps({"conversations": CONVERSATION, "task_id": f"t{i}"}) + "\n" for i in range(2)))
    return path


@pytest.fixture(scope="module")
def sft_run(tiny_model_dir, demos_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    metrics = train_sft(tiny_model_dir, root / "adapter", small_sft(demos_file), metrics_dir=root / "metrics",
                        curves_png=root / "curves.png")
    return root, metrics


def test_sft_changes_every_adapter_tensor_and_logs_curves(sft_run, tiny_model_dir):
    root, metrics = sft_run
    assert metrics["global_steps"] == 3
    assert metrics["adapter_tensors"] > 0 and metrics["adapter_tensors_changed"] == metrics["adapter_tensors"]
    # the saved adapter differs from a fresh LoRA init (B starts at zero)
    model = load_model(tiny_model_dir, root / "adapter", trainable=False)
    lora_b = [t for n, t in adapter_state(model).items() if "lora_B" in n]
    assert lora_b and any(t.abs().sum() > 0 for t in lora_b)
    series = read_dvclive_series(root / "metrics")
    assert [step for step, _ in series["loss"]] == [1, 2, 3]  # dvclive step = the trainer's global_step
    assert "learning_rate" in series and "grad_norm" in series
    assert (root / "curves.png").stat().st_size > 1000
    assert json.loads((root / "metrics" / "train.json").read_text())["tokens_per_s"] > 0


def test_adapter_round_trip_loads_with_peft_and_generates(sft_run, tiny_model_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    root, _ = sft_run
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {p.name for p in (root / "adapter").iterdir()}
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    model = PeftModel.from_pretrained(base, str(root / "adapter")).eval()
    tokenizer = load_tokenizer(root / "adapter")
    ids = tokenizer.apply_chat_template(CONVERSATION[:1], add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    # the adapter is active: its logits differ from the base model's
    with torch.no_grad():
        with_adapter = model(ids).logits
        with model.disable_adapter():
            without = model(ids).logits
    assert not torch.allclose(with_adapter, without)


def test_loss_mask_covers_exactly_the_assistant_turns(tiny_model_dir, demos_file, tmp_path):
    from datasets import Dataset
    from peft import get_peft_model
    from trl import SFTConfig, SFTTrainer

    from termagent.train.common import training_kwargs

    tokenizer = load_tokenizer(tiny_model_dir)
    model = get_peft_model(load_model(tiny_model_dir), SMALL_LORA.to_peft())
    config = SFTConfig(**training_kwargs(output_dir=tmp_path, seed=0, max_length=512, assistant_only_loss=True,
                                         packing=False, max_steps=1))
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=Dataset.from_list([{"messages": CONVERSATION}]))
    batch = trainer.data_collator([trainer.train_dataset[0]])
    labels = batch["labels"][0]
    trained = tokenizer.decode(labels[labels != -100].tolist())
    assert trained == REPLY_1 + "<|im_end|>" + REPLY_2 + "<|im_end|>"
    assert "Task:" not in trained and "New Terminal Output" not in trained and "<think>" not in trained


def test_rollout_rows_and_sharegpt_rows_become_conversations(tmp_path):
    row = {"task_id": "t", "prompt": CONVERSATION[:1], "completion": REPLY_1, "verifier_reward": 1.0}
    assert to_conversation(row, "x") == CONVERSATION[:2]
    share = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    assert to_conversation(share, "x") == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_conversations([str(tmp_path / "missing.jsonl")])
    with pytest.raises(ValueError, match="40-hex"):
        load_conversations(["open-thoughts/OpenThoughts-Agent-v1-SFT@main"])


# -- DPO ----------------------------------------------------------------------------------------------------
def dpo_file(path, n=4):
    rows = [{"task_id": f"t{i}", "prompt": CONVERSATION[:1], "chosen": REPLY_1,
             "rejected": "ls -la", "reward_chosen": 1.0, "reward_rejected": 0.0} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_dpo_reference_is_the_sft_policy_before_training(sft_run, tiny_model_dir, tmp_path):
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from termagent.train.common import training_kwargs

    root, _ = sft_run
    tokenizer = load_tokenizer(tiny_model_dir)
    model = load_model(tiny_model_dir, root / "adapter", trainable=True)
    rows = [to_preference(json.loads(line), "x") for line in dpo_file(tmp_path / "d.jsonl").read_text().splitlines()]
    trainer = DPOTrainer(model=model, ref_model=None, processing_class=tokenizer, train_dataset=Dataset.from_list(rows),
                         args=DPOConfig(**training_kwargs(output_dir=tmp_path / "out", seed=0, max_length=512, max_steps=1)))
    peft_model = trainer.model
    assert set(peft_model.peft_config) == {"default", "ref"}
    ids = tokenizer.apply_chat_template(CONVERSATION, return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        peft_model.set_adapter("ref")
        ref = peft_model(ids).logits
        peft_model.set_adapter("default")
        policy = peft_model(ids).logits
        with peft_model.disable_adapter():
            base = peft_model(ids).logits
    assert torch.allclose(ref, policy)
    assert not torch.allclose(ref, base)  # the reference is the SFT policy, not the base model


def test_dpo_trains_from_the_sft_adapter(sft_run, tiny_model_dir, tmp_path):
    root, _ = sft_run
    params = DPOParams(dataset=str(dpo_file(tmp_path / "d.jsonl")), max_length=512, max_steps=2,
                       gradient_accumulation_steps=1, learning_rate=1e-2, warmup_ratio=0.0)
    metrics = train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    assert metrics["pairs"]["used"] == 4 and metrics["global_steps"] == 2
    assert metrics["adapter_tensors_changed"] == metrics["adapter_tensors"] > 0
    saved = json.loads((tmp_path / "dpo" / "adapter_config.json").read_text())
    assert saved["r"] == SMALL_LORA.r
    sft = adapter_state(load_model(tiny_model_dir, root / "adapter", trainable=False))
    dpo = adapter_state(load_model(tiny_model_dir, tmp_path / "dpo", trainable=False))
    assert sft.keys() == dpo.keys() and any(not sft[k].equal(dpo[k]) for k in sft)


def test_dpo_whose_steps_change_nothing_fails_instead_of_saving(sft_run, tiny_model_dir, tmp_path):
    # one step under a warmup as long as the run: the learning rate is 0, the adapter stays the SFT one
    root, _ = sft_run
    params = DPOParams(dataset=str(dpo_file(tmp_path / "d.jsonl")), max_length=512, max_steps=1,
                       gradient_accumulation_steps=1, learning_rate=1e-2, warmup_ratio=0.1)
    with pytest.raises(RuntimeError, match="1 optimizer step.*changed none of the"):
        train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    assert not (tmp_path / "dpo" / "adapter_config.json").exists()


def test_dpo_empty_input_fails_clearly_or_skips(sft_run, tiny_model_dir, tmp_path):
    root, _ = sft_run
    (tmp_path / "empty.jsonl").write_text("")
    params = DPOParams(dataset=str(tmp_path / "empty.jsonl"))
    with pytest.raises(ValueError, match="no usable preference pair.*skip_if_empty"):
        train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    params = DPOParams(dataset=str(tmp_path / "empty.jsonl"), skip_if_empty=True)
    metrics = train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    assert metrics["skipped"] and (tmp_path / "dpo" / "adapter_config.json").is_file()
    # the stage's declared outputs exist when it skips (DVC fails a stage whose outs are missing)
    assert (tmp_path / "m" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "m" / "dvclive").is_dir() and (tmp_path / "m" / "train.json").is_file()


def test_dpo_counts_prompts_too_long_and_splits_shared_history():
    shared = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "obs"}]
    row = {"prompt": CONVERSATION[:1], "chosen": [*shared, {"role": "assistant", "content": "good"},
                                                    {"role": "user", "content": "more"}],
           "rejected": [*shared, {"role": "assistant", "content": "bad"}]}
    pref = to_preference(row, "x")
    assert pref["prompt"] == CONVERSATION[:1] + shared
    assert pref["chosen"] == [{"role": "assistant", "content": "good"}]
    assert pref["rejected"] == [{"role": "assistant", "content": "bad"}]


def test_dpo_drops_and_counts_prompts_longer_than_max_length(tiny_model_dir, tmp_path):
    from termagent.train.dpo import load_preferences

    rows, counts = load_preferences(dpo_file(tmp_path / "d.jsonl", n=3), load_tokenizer(tiny_model_dir), max_length=8)
    assert rows == [] and counts == {"read": 3, "prompt_too_long": 3, "used": 0}


def test_warmup_off_records_start_from_base(tmp_path):
    write_start(tmp_path / "warmup", base_dir="models/base", adapter=False)
    base, adapter = resolve_start(tmp_path / "warmup")
    assert str(base) == "models/base" and adapter is None
    assert json.loads((tmp_path / "warmup" / "start.json").read_text())["start_from"] == "base"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "start.json").write_text('{"start_from": "adapter", "base": "b", "adapter": "nowhere"}')
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        resolve_start(tmp_path / "bad")


def test_full_finetune_saves_a_full_model_that_is_the_base_of_later_adapters(tiny_model_dir, demos_file, tmp_path):
    """Warmup with full_finetune (the embedded profile): every weight trains, models/warmup is a whole model
    that start.json names as GRPO's base, and an SFT adapter trained on it is a standard PEFT adapter."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from termagent.train.warmup import resolve_base

    warmup = tmp_path / "warmup"
    metrics = train_sft(tiny_model_dir, warmup, small_sft(demos_file, full_finetune=True, max_steps=2),
                        metrics_dir=tmp_path / "wm")
    assert metrics["adapter_tensors"] > 0 and metrics["adapter_tensors_changed"] == metrics["adapter_tensors"]
    assert (warmup / "config.json").is_file() and not (warmup / "adapter_config.json").exists()
    write_start(warmup, base_dir=tiny_model_dir, adapter=False, full_model=True)
    assert (warmup / "model.safetensors").is_file()  # start.json was added, the model not wiped
    assert resolve_start(warmup) == (warmup, None)
    assert resolve_base(warmup) == warmup and resolve_base(tiny_model_dir) == tiny_model_dir
    base_sd = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).state_dict()
    warm_sd = AutoModelForCausalLM.from_pretrained(str(warmup)).state_dict()
    assert any(not base_sd[k].equal(warm_sd[k]) for k in base_sd)
    # the next stage: a LoRA adapter on the warmup model, loadable by PeftModel.from_pretrained
    train_sft(resolve_base(warmup), tmp_path / "sft", small_sft(demos_file, max_steps=1), metrics_dir=tmp_path / "sm")
    assert json.loads((tmp_path / "sft" / "adapter_config.json").read_text())["base_model_name_or_path"] == str(warmup)
    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(warmup)), str(tmp_path / "sft"))
    with pytest.raises(ValueError, match="init_adapter"):
        train_sft(tiny_model_dir, tmp_path / "x", small_sft(demos_file, full_finetune=True),
                  metrics_dir=tmp_path / "xm", init_adapter=tmp_path / "sft")


def test_context_windows_keep_each_assistant_turn_and_at_most_n_tokens_before_it(tiny_model_dir):
    from termagent.train.sft import context_windows

    tokenizer = load_tokenizer(tiny_model_dir)
    full = tokenizer.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True,
                                         return_assistant_tokens_mask=True)
    windows = context_windows(tokenizer, [CONVERSATION], context=8)
    assert len(windows) == 2  # one per assistant turn
    text = tokenizer.decode(full["input_ids"])
    for window, reply in zip(windows, (REPLY_1, REPLY_2)):
        mask = window["assistant_masks"]
        assert len(window["input_ids"]) == len(mask) and mask.count(0) == 8  # exactly the 8 tokens before
        target = tokenizer.decode([t for t, m in zip(window["input_ids"], mask) if m])
        assert target == reply + "<|im_end|>"  # the loss is on this turn only, all of it
        assert tokenizer.decode(window["input_ids"]) in text  # a contiguous slice of the conversation
    # a context longer than the conversation keeps everything before the turn
    first = context_windows(tokenizer, [CONVERSATION], context=10_000)[1]
    assert first["input_ids"] == full["input_ids"][: len(first["input_ids"])]
    assert sum(first["assistant_masks"]) == len(tokenizer(REPLY_2 + "<|im_end|>", add_special_tokens=False)["input_ids"])


def test_window_phase_trains_first_and_its_curves_continue_into_the_conversations(tiny_model_dir, demos_file, tmp_path):
    params = small_sft(demos_file, max_steps=2, window_epochs=1.0, window_context=16, window_batch_size=2,
                       full_finetune=True, logging_steps=1)
    metrics = train_sft(tiny_model_dir, tmp_path / "model", params, metrics_dir=tmp_path / "metrics")
    assert metrics["windows"]["examples"] == 4 and metrics["windows"]["steps"] == 2
    assert metrics["windows"]["first_loss"] is not None and metrics["global_steps"] == 2
    # one series: the window steps 1-2, then the conversation steps shifted to 3-4
    series = read_dvclive_series(tmp_path / "metrics")
    assert [step for step, _ in series["loss"]] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="window_batch_size"):
        small_sft(demos_file, window_batch_size=0)



def test_group_by_length_batches_windows_of_similar_length(tiny_model_dir, demos_file, tmp_path):
    """group_by_length: the trainer samples through transformers' LengthGroupedSampler, whose batches hold
    windows of similar lengths, so they carry less padding than random ones."""
    from datasets import Dataset
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from termagent.train.sft import _fit

    tokenizer = load_tokenizer(tiny_model_dir)
    # 64 windows, short and long in alternation: random pairs mix them half of the time
    windows = [{"input_ids": [5] * n, "assistant_masks": [0] * 2 + [1] * (n - 2)} for _ in range(32) for n in (6, 60)]

    def fit(grouped: bool):
        return _fit(load_model(tiny_model_dir, trainable=True), Dataset.from_list(windows), tokenizer,
                    small_sft(demos_file, max_steps=1, full_finetune=True, group_by_length=grouped), tmp_path,
                    stage="test", epochs=1.0, batch_size=2, accumulation=1, max_length=1024, learning_rate=1e-3,
                    lr_scheduler_type="constant")[0]

    assert not isinstance(fit(False)._get_train_sampler(), LengthGroupedSampler)
    trainer = fit(True)
    assert isinstance(trainer._get_train_sampler(), LengthGroupedSampler)
    padded = sum(batch["input_ids"].numel() for batch in trainer.get_train_dataloader())
    # 4 mega-batches of 16 windows, each sorted by length: at most one mixed pair in each
    assert padded <= 32 * (60 + 6) + 4 * (60 - 6)


def test_window_micro_batches_take_the_random_batch_step_with_less_padding(tiny_model_dir, demos_file, tmp_path):
    """window_micro_batches: one optimizer step over the same 16 windows, as one padded batch or as 4
    length-balanced micro-batches (transformers' BatchRebalanceSampler) with accumulated gradients, has the
    same loss and gradient norm (the loss is normalised by the step's label tokens, not per micro-batch),
    and the micro-batches carry far less padding."""
    from datasets import Dataset
    from transformers.trainer_pt_utils import BatchRebalanceSampler

    from termagent.train.sft import _fit

    tokenizer = load_tokenizer(tiny_model_dir)
    windows = [{"input_ids": [5 + i % 7] * n, "assistant_masks": [0] * 2 + [1] * (n - 2)}
               for i, n in enumerate([6, 60, 9, 45, 12, 30, 7, 52] * 2)]

    def fit(micro_batches: int):
        trainer, _, _ = _fit(load_model(tiny_model_dir, trainable=True), Dataset.from_list(windows), tokenizer,
                          small_sft(demos_file, max_steps=1, full_finetune=True, logging_steps=1), tmp_path,
                          stage="test", epochs=1.0, batch_size=16, accumulation=1, max_length=1024,
                          learning_rate=1e-3, lr_scheduler_type="constant", micro_batches=micro_batches)
        step = next(h for h in trainer.state.log_history if "grad_norm" in h)
        batches = list(trainer.get_train_dataloader())
        return trainer, step, batches

    _, plain, plain_batches = fit(1)
    trainer, micro, micro_batches = fit(4)
    assert isinstance(trainer._get_train_sampler(), BatchRebalanceSampler)
    assert len(plain_batches) == 1 and len(micro_batches) == 4
    assert sum(len(b["input_ids"]) for b in micro_batches) == 16  # every window once, in one step
    assert micro["loss"] == pytest.approx(plain["loss"], rel=1e-4)
    assert micro["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-3)
    padded = sum(b["input_ids"].numel() for b in micro_batches)
    assert padded < 0.7 * plain_batches[0]["input_ids"].numel()  # 16 x 60 padded vs sorted groups
    with pytest.raises(ValueError, match="divide window_batch_size"):
        small_sft(demos_file, window_batch_size=16, window_micro_batches=3)


def test_window_phase_has_its_own_rate_and_schedule(tiny_model_dir, demos_file, tmp_path):
    params = small_sft(demos_file, max_steps=3, window_epochs=1.0, window_context=16, window_batch_size=1,
                       full_finetune=True, logging_steps=1, learning_rate=1e-3, lr_scheduler_type="cosine",
                       warmup_ratio=0.0, window_learning_rate=5e-3, window_lr_scheduler_type="constant")
    train_sft(tiny_model_dir, tmp_path / "model", params, metrics_dir=tmp_path / "metrics")
    rates = [rate for _, rate in read_dvclive_series(tmp_path / "metrics")["learning_rate"]]
    assert rates[:3] == pytest.approx([5e-3] * 3)  # the window steps: constant at the window rate
    assert rates[3] == pytest.approx(1e-3) and rates[4] < rates[3]  # the conversations: cosine from learning_rate


def test_window_batches_carry_loss_on_their_turn_only(tiny_model_dir, demos_file, tmp_path):
    """What reaches the loss in the window phase: the labels TRL builds from the windows' masks."""
    from datasets import Dataset

    from termagent.train.sft import _fit, context_windows

    tokenizer = load_tokenizer(tiny_model_dir)
    windows = context_windows(tokenizer, [CONVERSATION], context=8)
    trainer, _, _ = _fit(load_model(tiny_model_dir, trainable=True), Dataset.from_list(windows), tokenizer,
                      small_sft(demos_file, max_steps=1, full_finetune=True), tmp_path, stage="test", epochs=1.0,
                      batch_size=2, accumulation=1, max_length=1024, learning_rate=1e-3,
                      lr_scheduler_type="constant")
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    for labels, reply in zip(batch["labels"], (REPLY_1, REPLY_2)):
        assert tokenizer.decode(labels[labels != -100].tolist()) == reply + "<|im_end|>"


def test_sft_refuses_a_max_length_that_cuts_every_reply_off(tiny_model_dir, demos_file, tmp_path):
    """A max_length shorter than every first prompt leaves TRL no trained token (it would fail on an empty
    dataset); the stage names the param instead."""
    with pytest.raises(ValueError, match=r"test.max_length=16"):
        train_sft(tiny_model_dir, tmp_path / "out", small_sft(demos_file, max_length=16, max_steps=1),
                  metrics_dir=tmp_path / "m", stage="test")
    assert not (tmp_path / "out").exists()
