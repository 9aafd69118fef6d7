"""The base_model stage: a deterministic tiny Qwen3, its tokenizer and chat template; the hf source's checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer

from termagent.models.hub import HubError, snapshot
from termagent.models.tiny import GENERATION_PROMPT, TinyModelConfig, build_tiny_model, train_tokenizer

REPO = Path(__file__).resolve().parent.parent
SMALL = {"vocab_size": 512, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "head_dim": 8,
         "max_position_embeddings": 1024}

CONVERSATION = [
    {"role": "user", "content": "Task: list the files.\n\nCurrent terminal state:\nroot@sandbox:/app# "},
    {"role": "assistant", "content": '{"analysis": "empty", "plan": "ls", "commands": '
                                     '[{"keystrokes": "ls -la\\n", "duration": 0.1}], "task_complete": false}'},
    {"role": "user", "content": "New Terminal Output:\ntotal 0\nroot@sandbox:/app# "},
    {"role": "assistant", "content": '{"analysis": "done", "plan": "", "commands": [], "task_complete": true}'},
]


def test_same_params_build_the_same_model(tmp_path):
    tasks = REPO / "data" / "tasks"
    first = build_tiny_model(tmp_path / "a", TinyModelConfig(**SMALL), [tasks])
    second = build_tiny_model(tmp_path / "b", TinyModelConfig(**SMALL), [tasks])
    other_seed = build_tiny_model(tmp_path / "c", TinyModelConfig(**SMALL, seed=1), [tasks])
    assert first["weights_sha256"] == second["weights_sha256"]
    assert first["tokenizer_sha256"] == second["tokenizer_sha256"]
    assert (tmp_path / "a/model.safetensors").read_bytes() == (tmp_path / "b/model.safetensors").read_bytes()
    assert other_seed["weights_sha256"] != first["weights_sha256"]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["params"]["hidden_size"] == 32 and manifest["corpus"]["n_texts"] > 0


def test_model_config_is_qwen3_with_the_tokenizer_ids(tiny_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["num_key_value_heads"] == 2 and config["num_attention_heads"] == 4
    assert config["vocab_size"] >= len(tokenizer) and config["vocab_size"] % 64 == 0
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    generation = json.loads((tiny_model_dir / "generation_config.json").read_text())
    assert tokenizer.eos_token_id in generation["eos_token_id"]


def test_tokenizer_is_lossless_and_keeps_chat_tokens_whole(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for token in ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"]:
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, token
    text = CONVERSATION[1]["content"] + "\n\tüñï €\x1b[0m C-c\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text  # byte-level: every string round-trips
    # the corpus taught it the protocol: a JSON reply costs far fewer tokens than bytes
    assert len(ids) < len(text.encode()) / 2


def test_chat_template_is_qwen3_shaped_and_prefix_preserving(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt = tokenizer.apply_chat_template(CONVERSATION[:1], tokenize=False, add_generation_prompt=True)
    assert prompt == f"<|im_start|>user\n{CONVERSATION[0]['content']}<|im_end|>\n" + GENERATION_PROMPT
    assert GENERATION_PROMPT == "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    # what the model is prompted with + what it writes == the training text of that turn (multi-turn too)
    for turn in (1, 3):
        prompt = tokenizer.apply_chat_template(CONVERSATION[:turn], tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(CONVERSATION[: turn + 1], tokenize=False)
        assert full.startswith(prompt + CONVERSATION[turn]["content"] + "<|im_end|>")


def test_assistant_mask_marks_exactly_the_assistant_tokens(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = tokenizer.apply_chat_template(CONVERSATION, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    marked = [i for i, m in zip(ids, mask) if m]
    expected = []
    for message in CONVERSATION[1::2]:
        expected += tokenizer(message["content"] + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert marked == expected
    # the marked spans are contiguous runs ending in <|im_end|>, one per assistant turn
    runs = "".join(map(str, mask)).split("0")
    assert len([r for r in runs if r]) == 2
    assert ids[max(i for i, m in enumerate(mask) if m)] == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_stage_script_builds_models_base(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["base_model"]["source"] = "tiny"  # the gguf source is tests/test_gguf_source.py's (no download here)
    params["base_model"]["tiny"].update(SMALL)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    out = tmp_path / "models" / "base"
    result = subprocess.run([sys.executable, "stages/base_model.py", "--params", str(params_file), "--out", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "tiny Qwen3" in result.stdout
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "manifest.json"} <= {
        p.name for p in out.iterdir()}
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging dir left behind


def test_hf_source_needs_a_commit_revision(tmp_path):
    with pytest.raises(HubError, match="40-hex commit"):
        snapshot(tmp_path / "base", "nvidia/Nemotron-Terminal-8B", "REPLACE-WITH-COMMIT-SHA")
    with pytest.raises(HubError, match="40-hex commit"):
        snapshot(tmp_path / "base", "nvidia/Nemotron-Terminal-8B", "main")


def test_hf_source_fails_loudly_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match="could not download nvidia/Nemotron-Terminal-8B@"):
        snapshot(tmp_path / "base", "nvidia/Nemotron-Terminal-8B", "a" * 40)
    assert not (tmp_path / "base").exists() and list(tmp_path.iterdir()) == []


def test_h100_profile_pins_nemotron_and_vllm():
    from termagent.params import load_params

    profile = load_params(REPO / "params.yaml", REPO / "profiles" / "h100.yaml")
    assert profile["base_model"]["source"] == "hf"
    assert profile["base_model"]["hf_id"] == "nvidia/Nemotron-Terminal-8B"
    assert profile["serve"]["backend"] == "vllm"
    assert profile["serve"]["vllm"]["max_model_len_lora"] == 32768
    assert profile["serve"]["vllm"]["gpu_memory_utilization"] == 0.85


def test_the_tiny_tokenizer_round_trips_text():
    texts = ["Count the lines of `/app/harbor_78.log` that contain `nimbus`.",
             "grep -c nimbus /app/harbor_78.log > /app/cedar_16.txt"] * 20
    tokenizer = train_tokenizer(texts, vocab_size=400)
    assert "Ġnimbus" in tokenizer.tokenize("grep -c nimbus /app")  # Qwen's split: the space glued on
    ids = tokenizer("x = `a b`\n  y", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == "x = `a b`\n  y"
