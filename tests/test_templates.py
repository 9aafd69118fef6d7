"""One rendering for training and evaluation (termagent.models.templates, docs/templates.md).

Real tokenizers, no download: a byte-level BPE trained here with Qwen3's special tokens (as the tiny model's),
carrying the stock Qwen3 template read from the installed TRL package (never copied), or a ChatML one. The
training side is TRL's own SFTTrainer tokenisation (its assistant mask); the eval side is HFPolicy's prompt."""

from __future__ import annotations

from importlib.resources import files

import pytest

from termagent.models.templates import (
    TINY_TEMPLATE,
    TemplateError,
    has_generation_markers,
    install_template,
    project_template,
)
from termagent.models.tiny import train_tokenizer
from termagent.protocol.observation import format_observation
from termagent.protocol.parse import AgentResponse, Command, render_response
from termagent.protocol.prompt import build_initial_messages


def trl_template(name: str) -> str:
    """A template as the installed TRL bundles it (read at test time)."""
    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


# A SmolLM2-shaped ChatML template, in our own words: a default system prompt when the conversation has none.
SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SMOL_LIKE = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOL_SYSTEM + "<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def reply(analysis: str, keystrokes: str, done: bool = False) -> str:
    return render_response(AgentResponse(analysis, "Next step.", (Command(keystrokes, 0.1),), done))


# A 3-turn Terminus conversation: the protocol's first prompt, replies and observations.
CONVERSATION = [
    *build_initial_messages("Count the lines of /app/cedar_16.txt into /app/count.txt.", "root@sandbox:/app# "),
    {"role": "assistant", "content": reply("A fresh shell {empty}.", "wc -l < cedar_16.txt > count.txt\n")},
    {"role": "user", "content": format_observation("root@sandbox:/app# wc -l < cedar_16.txt > count.txt\n")},
    {"role": "assistant", "content": reply("Check it.", "cat count.txt\n")},
    {"role": "user", "content": format_observation("12\nroot@sandbox:/app# ", confirm_completion=True)},
    {"role": "assistant", "content": reply("The count is written.", "", done=True)},
]


@pytest.fixture(scope="module")
def base_tokenizer():
    """A small byte-level BPE with Qwen3's special tokens (<|im_start|>, <|im_end|>, <think>, </think>)."""
    texts = [m["content"] for m in CONVERSATION] * 4
    return train_tokenizer(texts, vocab_size=600)


def with_template(base_tokenizer, template: str, install: bool = True):
    import copy

    tokenizer = copy.deepcopy(base_tokenizer)
    tokenizer.chat_template = template
    if install:
        install_template(tokenizer)
    return tokenizer


@pytest.fixture(scope="module")
def tiny_model(base_tokenizer):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(base_tokenizer) + 8, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                         eos_token_id=base_tokenizer.eos_token_id, pad_token_id=base_tokenizer.pad_token_id)
    return Qwen3ForCausalLM(config).eval()


def trl_sft_example(tokenizer, model, conversation, tmp_path) -> tuple[list[int], list[int]]:
    """(input_ids, mask of the trained positions) of one conversation exactly as TRL's SFTTrainer prepares it
    (TRL 1.16 folds its assistant mask into `labels`: -100 where nothing is trained)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(tmp_path), assistant_only_loss=True, max_length=None, packing=False,
                     report_to="none", use_cpu=True, bf16=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([{"messages": conversation}]),
                         processing_class=tokenizer)
    row = trainer.train_dataset[0]
    return list(row["input_ids"]), [int(label != -100) for label in row["labels"]]


def spans(mask: list[int]) -> list[tuple[int, int]]:
    out, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            out.append((start, i))
            start = None
    return out


FAMILIES = {
    "qwen3 (TRL's stock qwen3.jinja)": lambda: trl_template("qwen3"),
    "chatml (SmolLM2-shaped, default system prompt)": lambda: SMOL_LIKE,
    "chatml (TRL's qwen2_5.jinja)": lambda: trl_template("qwen2_5"),
}


# -- (a) the ids a turn is trained on, with everything before it, are the ids the eval sends -----------------
@pytest.mark.parametrize("family", list(FAMILIES))
def test_sft_trains_each_turn_on_exactly_the_ids_the_eval_sends(family, base_tokenizer, tiny_model, tmp_path):
    from termagent.policy.hf import HFPolicy

    tokenizer = with_template(base_tokenizer, FAMILIES[family]())
    ids, mask = trl_sft_example(tokenizer, tiny_model, CONVERSATION, tmp_path)
    policy = HFPolicy.from_model(tiny_model, tokenizer)
    turns = [i for i, m in enumerate(CONVERSATION) if m["role"] == "assistant"]
    trained = spans(mask)
    assert len(trained) == len(turns) == 3
    for (start, end), index in zip(trained, turns):
        sent = policy.prompt_ids(CONVERSATION[:index])  # what the eval path sends for this turn
        assert ids[:start] == list(sent), f"{family}: turn {index}: the trained context is not the eval's prompt"
        assert tokenizer.decode(ids[start:end]) == CONVERSATION[index]["content"] + "<|im_end|>"


def test_stock_qwen3_history_differs_and_the_project_template_fixes_it(base_tokenizer, tiny_model, tmp_path):
    """Why the project template exists: with the stock template (TRL swapping in its training variant for SFT,
    the stock one rendering the eval's prompt) turn 2's trained context is not what the eval sends."""
    stock = with_template(base_tokenizer, trl_template("qwen3"), install=False)
    ids, mask = trl_sft_example(stock, tiny_model, CONVERSATION, tmp_path)
    start = spans(mask)[1][0]
    sent = stock.apply_chat_template(CONVERSATION[:3], add_generation_prompt=True, enable_thinking=False,
                                     tokenize=True, return_dict=True)["input_ids"]
    assert ids[:start] != list(sent)


def test_the_project_qwen3_template_keeps_the_stock_first_prompt_and_last_turn(base_tokenizer):
    stock, ours = trl_template("qwen3"), project_template(trl_template("qwen3"))
    tokenizer = with_template(base_tokenizer, ours, install=False)
    for messages, prompt in ((CONVERSATION[:1], True), (CONVERSATION[:2], False)):
        assert (tokenizer.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False)
                == tokenizer.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False,
                                                 chat_template=stock, enable_thinking=False))
    history = tokenizer.apply_chat_template(CONVERSATION[:3], add_generation_prompt=True, tokenize=False)
    assert history.count("<think>\n\n</think>\n\n") == 2  # thinking off everywhere, history included
    assert history.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_chatml_keeps_the_models_own_tokens_and_default_system_prompt(base_tokenizer):
    ours = with_template(base_tokenizer, SMOL_LIKE)
    for cut, prompt in ((1, True), (3, True), (6, False)):
        assert (ours.apply_chat_template(CONVERSATION[:cut], add_generation_prompt=prompt, tokenize=True)
                == base_tokenizer.apply_chat_template(CONVERSATION[:cut], add_generation_prompt=prompt, tokenize=True,
                                                      chat_template=SMOL_LIKE))
    text = ours.apply_chat_template(CONVERSATION[:1], add_generation_prompt=True, tokenize=False)
    assert text.startswith(f"<|im_start|>system\n{SMOL_SYSTEM}<|im_end|>\n<|im_start|>user\n")


def test_project_template_is_idempotent_and_tiny_is_kept():
    assert project_template(TINY_TEMPLATE) is TINY_TEMPLATE
    for make in FAMILIES.values():
        ours = project_template(make())
        assert has_generation_markers(ours) and project_template(ours) == ours
    # TRL's training variant of Qwen3 is the same family: the same project template
    assert project_template(trl_template("qwen3_training")) == project_template(trl_template("qwen3"))


# -- (b) MT-GRPO's token buffer accepts it -----------------------------------------------------------------
def test_mt_grpo_token_buffer_accepts_the_project_template_of_stock_qwen3(base_tokenizer):
    from termagent.policy.base import PolicyError
    from termagent.train.tito import ChatSuffix

    with pytest.raises(PolicyError, match="not prefix-preserving"):  # the stock template itself is refused
        ChatSuffix.from_tokenizer(with_template(base_tokenizer, trl_template("qwen3"), install=False))
    suffix = ChatSuffix.from_tokenizer(with_template(base_tokenizer, trl_template("qwen3")))
    assert suffix == ChatSuffix("<|im_end|>\n", "<|im_start|>user\n",
                                "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


# -- (d) SFT's assistant token count is the mask TRL trains with --------------------------------------------
@pytest.mark.parametrize("install", [True, False], ids=["project", "stock"])
def test_assistant_token_count_is_the_mask_trl_trains_with(install, base_tokenizer, tiny_model, tmp_path):
    from termagent.train.sft import assistant_token_fraction

    tokenizer = with_template(base_tokenizer, trl_template("qwen3"), install=install)
    ids, mask = trl_sft_example(tokenizer, tiny_model, CONVERSATION, tmp_path)
    stats = assistant_token_fraction(tokenizer, [CONVERSATION], max_length=100_000)
    assert stats["assistant_tokens"] > 0
    assert stats["assistant_tokens"] == sum(mask) and stats["tokens"] == len(ids)
    cut = len(ids) // 2
    assert assistant_token_fraction(tokenizer, [CONVERSATION], max_length=cut)["assistant_tokens"] == sum(mask[:cut])


def test_load_tokenizer_installs_the_project_template(base_tokenizer, tmp_path):
    from termagent.train.common import load_tokenizer
    from termagent.train.sft import check_chat_template

    with_template(base_tokenizer, trl_template("qwen3"), install=False).save_pretrained(tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.chat_template == project_template(trl_template("qwen3"))
    check_chat_template(tokenizer)  # TRL can mask it


def test_base_model_rewrites_a_snapshot_template(base_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    from termagent.models.hub import rewrite_template

    with_template(base_tokenizer, trl_template("qwen3"), install=False).save_pretrained(tmp_path)
    rewrite_template(tmp_path)
    assert AutoTokenizer.from_pretrained(str(tmp_path)).chat_template == project_template(trl_template("qwen3"))


def test_chat_template_path_installs_a_marked_template_and_refuses_an_unmarked_one(base_tokenizer, tmp_path):
    import copy

    marked, unmarked = tmp_path / "marked.jinja", tmp_path / "plain.jinja"
    marked.write_text("{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}")
    unmarked.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    tokenizer = copy.deepcopy(base_tokenizer)
    install_template(tokenizer, marked)
    assert tokenizer.chat_template.endswith(marked.read_text()) and project_template(tokenizer.chat_template) == tokenizer.chat_template
    with pytest.raises(TemplateError, match=r"base_model.chat_template_path: .*plain.jinja has no \{% generation"):
        install_template(tokenizer, unmarked)


# -- (e) an unknown family -----------------------------------------------------------------------------------
def test_unknown_template_raises_naming_what_was_found_and_the_way_out():
    with pytest.raises(TemplateError, match=r"beginning .*start_header_id.*base_model.chat_template_path"):
        project_template(trl_template("llama3"))
    odd = SMOL_LIKE.replace("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\nSure: '")
    with pytest.raises(TemplateError, match="generation prompt"):
        project_template(odd)
    with pytest.raises(TemplateError, match="has none"):
        project_template("")

