"""In-process transformers generation (+ an optional PEFT adapter): the backend that returns token
ids and logprobs, so RL can train on exactly the tokens that were sampled.

Spec (termagent.policy.spec.HFSpec): `hf:MODEL_DIR[,adapter=ADAPTER_DIR][,context_limit=N][,device=cpu][,max_batch=8][,prefix_cache=16]`.
`prefix_cache=N` (N > 0) decodes through `termagent.policy.kv.CachedDecoder`: the keys/values of the last N
sequences are kept, so an episode's next call only prefills its new tokens, and a batch decodes without
re-prefilling padded prompts. For fixed weights only (eval, demos); a training loop's model leaves it off.
Logprobs are log softmax(logits / temperature) of the chosen tokens — the quantity TRL recomputes
for the importance ratio — taken from the raw logits, before top-p filtering, always upcast to float32 first.

`dtype=auto` (default) loads the weights in bf16 on a GPU that has it and on a CPU with bf16 instructions
(termagent.precision; TERMAGENT_BF16=0 turns it off), else fp32. A model wrapped with `from_model` keeps its
weights (a trainer's fp32 master copy): on a bf16 CPU its generation runs under bf16 autocast.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from termagent.policy.base import Generation, PolicyError, TokenPolicy


def _install_template(tokenizer, where) -> None:
    """The project's chat template (termagent.models.templates): the rendering training used, for the eval."""
    from termagent.models.templates import install_template

    try:
        install_template(tokenizer)
    except ValueError as error:
        raise PolicyError(f"hf policy: the tokenizer of {where}: {error}") from None


class HFPolicy(TokenPolicy):
    def __init__(
        self,
        model_dir: str | Path,
        adapter: str | Path | None = None,
        tokenizer: str | Path | None = None,
        context_limit: int | None = None,
        device: str | None = None,
        max_batch: int = 8,
        top_k: int = 0,  # 0: sample from the whole distribution (vLLM's default, TRL's assumption)
        name: str | None = None,
        prefix_cache: int = 0,
        dtype: str = "auto",
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from termagent import allocator
        from termagent.precision import generation_dtype

        allocator.configure()  # CPU: freed KV/logit blocks stay in the heap for the next call (allocator.py)
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise PolicyError(f"hf policy: {self.model_dir} has no config.json (not a transformers model dir)")
        self.adapter = Path(adapter) if adapter else None
        if self.adapter and not (self.adapter / "adapter_config.json").is_file():
            raise PolicyError(f"hf policy: adapter {self.adapter} has no adapter_config.json")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.max_batch = max_batch
        self.top_k = top_k
        self.name = name or self.model_dir.name + (f"+{self.adapter.name}" if self.adapter else "")

        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer or self.model_dir))
        _install_template(self.tokenizer, tokenizer or self.model_dir)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtypes = {"auto": generation_dtype(self.device), "float32": torch.float32, "bfloat16": torch.bfloat16}
        if dtype not in dtypes:
            raise PolicyError(f"hf policy: dtype must be one of {sorted(dtypes)}, got {dtype!r}")
        self.autocast_dtype = None  # the weights are already in the compute dtype
        model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=dtypes[dtype],
                                                     use_kernels=False)  # no Hub code (docs/kernels.md)
        if self.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(self.adapter))
        self.model = model.to(self.device).eval()

        self.context_limit = context_limit or self.model.config.max_position_embeddings
        # A generated sequence ends at any of these (Qwen3 lists <|im_end|> and <|endoftext|>).
        eos = self.model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
        self.eos_ids = sorted({*eos, self.tokenizer.eos_token_id} - {None})
        self.prefix_cache = prefix_cache
        self._decoder = None
        if self.prefix_cache > 0:
            from termagent.policy.kv import CachedDecoder

            self._decoder = CachedDecoder(self.model, eos_ids=self.eos_ids, max_entries=self.prefix_cache,
                                          top_k=self.top_k)

    @classmethod
    def from_model(cls, model, tokenizer, *, name: str = "policy", context_limit: int | None = None,
                   max_batch: int = 8, top_k: int = 0) -> HFPolicy:
        """Wrap a model already in memory (a trainer's PEFT model) without loading anything: multi-turn RL
        samples from the very weights it trains. The caller owns the model's mode (eval/no-grad)."""
        self = cls.__new__(cls)
        self.model_dir, self.adapter, self.name = None, None, name
        self.device = str(next(model.parameters()).device)
        self.max_batch, self.top_k = max_batch, top_k
        self.tokenizer, self.model = tokenizer, model
        _install_template(self.tokenizer, "the trainer's tokenizer")
        from termagent.precision import generation_dtype

        # fp32 weights where the device computes bf16 faster: autocast (the trainer's weights stay untouched)
        wanted = generation_dtype(self.device)
        fp32_weights = next(model.parameters()).dtype == torch.float32
        self.autocast_dtype = torch.bfloat16 if wanted == torch.bfloat16 and fp32_weights else None
        if self.tokenizer.pad_token_id is None:
            raise PolicyError("hf policy: the tokenizer has no pad token (set tokenizer.pad_token first)")
        self.context_limit = context_limit or model.config.max_position_embeddings
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
        self.eos_ids = sorted({*eos, self.tokenizer.eos_token_id} - {None})
        self.prefix_cache, self._decoder = 0, None  # the weights change under a trainer: nothing is cached
        return self

    @property
    def unpadded(self) -> bool:
        """Batched rows are not padded to the longest prompt: each prefills alone from its KV cache."""
        return self._decoder is not None

    # -- tokens -----------------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    # -- generation -------------------------------------------------------------------------------
    def generate_ids(
        self,
        prompts: list[list[int]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None = None,
        top_p: float = 1.0,
    ) -> list[Generation]:
        """Token in, token out: complete prompts given as token ids (no chat template, no re-tokenising).
        Multi-turn RL continues its own token buffer through this; `generate` renders messages and calls it."""
        if any(not p for p in prompts):
            raise PolicyError("hf policy: an empty prompt (no token ids) cannot be completed")
        results: list[Generation] = []
        # A seeded call forks the RNG so it does not change the caller's stream. An unseeded call must
        # NOT fork: restoring the state afterwards would make every unseeded call sample the same text.
        devices = [torch.cuda.current_device()] if self.device.startswith("cuda") else []
        rng = torch.random.fork_rng(devices=devices) if seed is not None else contextlib.nullcontext()
        with rng, self.autocast():
            if seed is not None:
                torch.manual_seed(seed)
            for start in range(0, len(prompts), self.max_batch):
                chunk = prompts[start : start + self.max_batch]
                results += self._generate_chunk(chunk, max_tokens, temperature, top_p)
        return results

    def autocast(self):
        """bf16 autocast for a wrapped fp32 model on a bf16 device (`from_model`), else nothing."""
        if getattr(self, "autocast_dtype", None) is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.split(":")[0], dtype=self.autocast_dtype)

    @property
    def decoder(self):
        """The prefix-cached decoder (None without `prefix_cache`), its end tokens the policy's current ones."""
        if self._decoder is not None:
            self._decoder.eos_ids = set(self.eos_ids)
        return self._decoder

    def to_generation(self, prompt: list[int], decoded) -> Generation:
        return Generation(
            text=self.tokenizer.decode(decoded.ids, skip_special_tokens=True),
            finish_reason="stop" if decoded.stopped else "length",
            prompt_tokens=len(prompt), completion_tokens=len(decoded.ids),
            prompt_ids=list(prompt), completion_ids=decoded.ids, logprobs=decoded.logprobs,
        )

    def _generate_cached(self, prompts: list[list[int]], max_tokens: int, temperature: float,
                         top_p: float) -> list[Generation]:
        decoded = self.decoder.generate(prompts, max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        return [self.to_generation(prompt, d) for prompt, d in zip(prompts, decoded)]

    @torch.no_grad()
    def _generate_chunk(self, prompts: list[list[int]], max_tokens: int, temperature: float,
                        top_p: float) -> list[Generation]:
        if self._decoder is not None:
            return self._generate_cached(prompts, max_tokens, temperature, top_p)
        pad_id = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        # left padding: every row's last prompt token sits at the same position, where generation starts
        input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=self.device)
        attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts],
                                      device=self.device)
        sampling = temperature > 0
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_tokens,
            do_sample=sampling,
            temperature=temperature if sampling else None,
            top_p=top_p if sampling else None,
            top_k=self.top_k if sampling else None,
            eos_token_id=self.eos_ids,
            pad_token_id=pad_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        new_tokens = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float()  # (batch, steps, vocab), raw
        if sampling:
            logits = logits / temperature
        token_logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)

        generations = []
        for row, prompt in enumerate(prompts):
            ids = new_tokens[row].tolist()
            end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
            finish = "stop" if end is not None else "length"
            ids = ids[: end + 1] if end is not None else ids
            generations.append(Generation(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                finish_reason=finish,
                prompt_tokens=len(prompt),
                completion_tokens=len(ids),
                prompt_ids=list(prompt),
                completion_ids=ids,
                logprobs=token_logprobs[row, : len(ids)].tolist(),
            ))
        return generations

    def close(self) -> None:
        self.model = None
        if self._decoder is not None:
            self._decoder.clear()
            self._decoder = None
