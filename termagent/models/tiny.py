"""A tiny Qwen3-architecture model built from scratch with a fixed seed: the base model of the unit tests and
the smoke profile (`base_model.source: tiny`). Same architecture family and chat format as the H100 profile's
model (Nemotron-Terminal-8B), so every stage runs the same code; small enough to train in seconds.

The tokenizer is a byte-level BPE trained on the task corpus (termagent.models.corpus). The chat template
(termagent.models.templates.TINY_TEMPLATE) is Qwen3's non-thinking shape: `<|im_start|>role\\ncontent<|im_end|>\\n`, and every assistant turn opens with
an empty `<think>\\n\\n</think>\\n\\n` — the generation prompt ends with it, so a model is trained on exactly
the text it is prompted with. `{% generation %}` marks what the model writes (content + `<|im_end|>`), for
TRL's assistant-only loss.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from termagent import atomic
from termagent.models.corpus import build_corpus, corpus_hash
from termagent.models.templates import TINY_TEMPLATE, install_template, template_sha256

ENDOFTEXT, IM_START, IM_END, THINK, END_THINK = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"
GENERATION_PROMPT = f"{IM_START}assistant\n{THINK}\n\n{END_THINK}\n\n"

# Qwen2/3's pre-tokenizer split: digits one by one, punctuation runs kept with their trailing newlines.
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class TinyModelConfig:
    vocab_size: int = 4096  # BPE target; the model's embedding is the tokenizer's size rounded up to 64
    hidden_size: int = 256
    intermediate_size: int = 1024
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 32
    max_position_embeddings: int = 8192  # the context limit the agent sees; prompts are a few thousand tokens
    rope_theta: float = 1_000_000.0
    seed: int = 0
    min_frequency: int = 2  # a merge needs two occurrences: keeps one-off strings out of the vocabulary


def train_tokenizer(texts: list[str], vocab_size: int, min_frequency: int = 2, max_length: int = 8192):
    """A byte-level BPE tokenizer with Qwen3's special tokens, pre-tokenizer split and chat template (a
    transformers tokenizer)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[ENDOFTEXT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable: no unknown tokens
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    # As in Qwen3, <think> and </think> are single tokens but not "special": decoding keeps them.
    tokenizer.add_tokens([AddedToken(THINK, special=False, normalized=False),
                          AddedToken(END_THINK, special=False, normalized=False)])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=IM_END, pad_token=ENDOFTEXT,
                                      model_max_length=max_length)
    wrapped.chat_template = TINY_TEMPLATE
    return wrapped


def weights_hash(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def build_model(config: TinyModelConfig, vocab_size: int, eos_id: int, pad_id: int):
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    model_config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(config.seed)
    model = Qwen3ForCausalLM(model_config).float().eval()
    # Sampling from the whole distribution by default, as vLLM does; `transformers serve` only turns
    # sampling off (temperature 0), never on, so do_sample must be set here.
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id,
                                               bos_token_id=None, do_sample=True, temperature=1.0,
                                               top_k=0, top_p=1.0)
    return model


def build_tiny_model(out_dir: str | Path, config: TinyModelConfig, task_dirs: list[str | Path],
                     chat_template_path: str | Path | None = None) -> dict:
    """Train the tokenizer, build the model, save both (and manifest.json) to `out_dir`, atomically.
    `chat_template_path`: a template to install instead of TINY_TEMPLATE (templates.install_template).
    Returns the manifest."""
    out_dir = Path(out_dir)
    texts = build_corpus([Path(d) for d in task_dirs])
    tokenizer = train_tokenizer(texts, config.vocab_size, config.min_frequency, config.max_position_embeddings)
    install_template(tokenizer, chat_template_path)
    model_vocab = -(-len(tokenizer) // 64) * 64  # padded: matmuls like multiples of 64
    model = build_model(config, model_vocab, tokenizer.convert_tokens_to_ids(IM_END),
                        tokenizer.convert_tokens_to_ids(ENDOFTEXT))

    with atomic.staged_dir(out_dir) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        manifest = {
            "source": "tiny",
            "architecture": "Qwen3ForCausalLM",
            "params": asdict(config),
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "tokenizer_vocab_size": len(tokenizer),
            "model_vocab_size": model_vocab,
            "corpus": {"task_dirs": [str(d) for d in task_dirs], "n_texts": len(texts),
                       "n_chars": sum(map(len, texts)), "sha256": corpus_hash(texts)},
            "weights_sha256": weights_hash(model),
            "tokenizer_sha256": hashlib.sha256((staging / "tokenizer.json").read_bytes()).hexdigest(),
            "chat_template_sha256": template_sha256(tokenizer.chat_template),
        }
        atomic.write_json(staging / "manifest.json", manifest)
    return manifest
