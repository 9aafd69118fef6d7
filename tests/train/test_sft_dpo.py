"""Real TRL steps on the tiny model: SFT (assistant-only loss mask, adapter changes, round trip),
DPO from the SFT adapter (the reference is the SFT policy; the adapter changes), warmup's start record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from termagent.models.artifact import resolve_start, write_start
from termagent.train.common import LoraParams, adapter_state, load_model, load_tokenizer, read_dvclive_series
from termagent.train.dpo import DPOParams, to_preference, train_dpo
from termagent.train.sft import SFTParams, load_conversations, to_conversation, train_sft

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
                'lora': SMALL_LORA, 'skip_seen_by': None}
    trl = {**SFTParams().trl, "learning_rate": 5e-3, "warmup_steps": 0.0, "logging_steps": 1, **kw.pop("trl", {})}
    defaults.update(kw)
    return SFTParams(**defaults, trl=trl)


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
    params = DPOParams(datasets=[str(dpo_file(tmp_path / "d.jsonl"))], max_length=512, gradient_accumulation_steps=1,
                       trl={**DPOParams().trl, "max_steps": 2, "learning_rate": 1e-2, "warmup_steps": 0.0})
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
    params = DPOParams(datasets=[str(dpo_file(tmp_path / "d.jsonl"))], max_length=512, gradient_accumulation_steps=1,
                       trl={**DPOParams().trl, "max_steps": 1, "learning_rate": 1e-2, "warmup_steps": 0.1})
    with pytest.raises(RuntimeError, match="1 optimizer step.*changed none of the"):
        train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    assert not (tmp_path / "dpo" / "adapter_config.json").exists()


def test_dpo_empty_input_fails_clearly_or_skips(sft_run, tiny_model_dir, tmp_path):
    root, _ = sft_run
    (tmp_path / "empty.jsonl").write_text("")
    params = DPOParams(datasets=[str(tmp_path / "empty.jsonl")], skip_if_empty=False)
    with pytest.raises(ValueError, match="no usable preference pair.*skip_if_empty"):
        train_dpo(tiny_model_dir, root / "adapter", tmp_path / "dpo", params, metrics_dir=tmp_path / "m")
    params = DPOParams(datasets=[str(tmp_path / "empty.jsonl")], skip_if_empty=True)
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


def test_the_warmup_adapter_is_where_sft_continues_and_grpo_starts(tiny_model_dir, demos_file, tmp_path):
    """Warmup (a LoRA SFT on the demos): models/warmup is an adapter that start.json names; the sft stage given
    --base models/warmup continues that adapter on the recorded base, and resolve_base gives the base."""
    from termagent.models.artifact import resolve_base, resolve_start_model

    warmup = tmp_path / "warmup"
    train_sft(tiny_model_dir, warmup, small_sft(demos_file, max_steps=1), metrics_dir=tmp_path / "wm")
    write_start(warmup, base_dir=tiny_model_dir, adapter=True)
    assert (warmup / "adapter_config.json").is_file() and (warmup / "start.json").is_file()
    assert resolve_start_model(warmup) == (Path(tiny_model_dir), warmup)
    assert resolve_base(warmup) == Path(tiny_model_dir) and resolve_start_model(tiny_model_dir) == (tiny_model_dir, None)
    base, adapter = resolve_start_model(warmup)
    metrics = train_sft(base, tmp_path / "sft", small_sft(demos_file, max_steps=1), metrics_dir=tmp_path / "sm",
                        init_adapter=adapter)
    assert metrics["adapter_tensors_changed"] == metrics["adapter_tensors"] > 0
    warm = adapter_state(load_model(base, warmup))
    sft = adapter_state(load_model(base, tmp_path / "sft"))
    assert warm.keys() == sft.keys() and any(not warm[k].equal(sft[k]) for k in warm)


def test_sft_refuses_a_max_length_that_cuts_every_reply_off(tiny_model_dir, demos_file, tmp_path):
    """A max_length shorter than every first prompt leaves TRL no trained token (it would fail on an empty
    dataset); the stage names the param instead."""
    with pytest.raises(ValueError, match=r"test.max_length=16"):
        train_sft(tiny_model_dir, tmp_path / "out", small_sft(demos_file, max_length=16, max_steps=1),
                  metrics_dir=tmp_path / "m", stage="test")
    assert not (tmp_path / "out").exists()
