"""Generation through a TRL GRPOTrainer's own vLLM engine, token in / token out: multi-turn RL rollouts on a GPU.

With `use_vllm=True` TRL owns a vLLM engine (`trainer.vllm_generation`: colocated in the trainer process, or a
client of `trl vllm-serve`) and pushes the trained weights into it before each `rollout_func` call. This policy
lets the Terminus agent loop sample from that engine exactly as it samples from the in-process model on a CPU:
`generate_ids(prompts)` takes token ids (the trajectory's buffer, never re-tokenised) and returns the sampled ids
and their logprobs. Wrapped in `BatchingPolicy`, the pending calls of concurrent episodes reach vLLM as one
`generate` (vLLM batches them; nothing is padded).

The primitive, per RESEARCH-training.md §1.6 and TRL 1.16's `VLLMGeneration.generate(prompts, images,
num_generations)`: it returns `(prompt_ids, completion_ids, logprobs[N][T][k], logprob_token_ids)`; the sampled
token's logprob is `logprobs[i][t][0]`. Its sampling settings are the trainer's (temperature, top-p, top-k,
min-p); `generation_kwargs` overrides them per call, which is how each turn gets its own `max_tokens` (the
trainer's `max_completion_length` is the whole trajectory's budget). A call asking for another temperature or
top-p than the trainer's is refused: the importance ratio TRL computes assumes the trainer's.

A token vLLM could not score (its logprob NaN; TRL's `extract_logprobs` hands it over as `None`) keeps `None`
in `Generation.logprobs` (`null` in the episode record), never a made-up number. TRL 1.16's GRPOTrainer reads a
`None` sampling logprob as NaN and gives that token an importance ratio of exactly 1 (no vLLM-vs-trainer
correction; the token still trains with its advantage) and leaves it out of the logged sampling/trainer
divergence. `unscored_tokens` counts them (MT-GRPO logs it per step as `mt/unscored_logprobs`).

Limits, stated rather than hidden: one training process only. The engine's `generate` is a collective in
server mode and with tensor parallelism (every rank must call it the same number of times), and episodes end
at different turns, so multi-process rollouts would need the ranks to step in lockstep — not built; the
trainer refuses it at the start (`MultiTurnRollout`). Seeded sampling is not offered (vLLM's per-request seed
is not exposed by TRL's primitive).
"""

from __future__ import annotations

import math
import threading

from termagent.policy.base import Generation, PolicyError, TokenPolicy


class TRLvLLMPolicy(TokenPolicy):
    """`vllm_generation`: a TRL `VLLMGeneration` (trainer.vllm_generation). `tokens`: any policy with
    `prompt_ids`, `eos_ids`, `tokenizer` and `context_limit` (an `HFPolicy.from_model` of the trainer's model:
    the chat template and end tokens the trainer uses)."""

    unpadded = True  # BatchingPolicy: rows of any length batch well (vLLM pads nothing)

    def __init__(self, vllm_generation, tokens, *, name: str = "policy"):
        self.vllm = vllm_generation
        self.tokens = tokens
        self.tokenizer = tokens.tokenizer
        self.eos_ids = list(tokens.eos_ids)
        self.context_limit = tokens.context_limit
        self.name = name
        self.max_batch = 1 << 16  # vLLM schedules its own batches
        self._lock = threading.Lock()  # generation_kwargs is shared state of the engine wrapper
        self.unscored_tokens = 0  # sampled tokens whose logprob vLLM could not give (None / NaN)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return self.tokens.prompt_ids(messages)

    def _check_sampling(self, temperature: float, top_p: float, seed: int | None) -> None:
        engine_t = float(self.vllm.temperature)
        engine_p = 1.0 if self.vllm.top_p is None else float(self.vllm.top_p)
        if abs(float(temperature) - engine_t) > 1e-6 or abs(float(top_p) - engine_p) > 1e-6:
            raise PolicyError(f"trl-vllm policy: a call asked for temperature {temperature}, top_p {top_p}; the "
                              f"trainer's engine samples at temperature {engine_t}, top_p {engine_p} (set the "
                              "agent's sampling to the trainer's: MTGRPOParams.agent_config does)")
        if seed is not None:
            raise PolicyError("trl-vllm policy: seeded sampling is not available through the trainer's vLLM engine")

    def generate_ids(self, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                     seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        if not prompts:
            return []
        if any(not p for p in prompts):
            raise PolicyError("trl-vllm policy: an empty prompt (no token ids) cannot be completed")
        self._check_sampling(temperature, top_p, seed)
        with self._lock:
            saved = dict(self.vllm.generation_kwargs)
            self.vllm.generation_kwargs["max_tokens"] = int(max_tokens)
            try:
                _, completion_ids, logprobs, _ = self.vllm.generate(prompts=[list(p) for p in prompts], images=None,
                                                                    num_generations=1)
            finally:
                self.vllm.generation_kwargs.clear()
                self.vllm.generation_kwargs.update(saved)
        if len(completion_ids) != len(prompts):
            raise PolicyError(f"trl-vllm policy: {len(prompts)} prompts gave {len(completion_ids)} completions")
        out = []
        for i, (prompt, ids) in enumerate(zip(prompts, completion_ids)):
            ids = [int(t) for t in ids][: int(max_tokens)]
            lps = None
            if logprobs is not None:
                lps = [sampled_logprob(per_token) for per_token in logprobs[i][: len(ids)]]
                self.unscored_tokens += sum(lp is None for lp in lps)
            stopped = bool(ids) and ids[-1] in self.eos_ids
            out.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True),
                                  finish_reason="stop" if stopped else "length", prompt_tokens=len(prompt),
                                  completion_tokens=len(ids), prompt_ids=list(prompt), completion_ids=ids,
                                  logprobs=lps))
        return out

    def close(self) -> None:  # the engine is the trainer's
        pass


def sampled_logprob(per_token) -> float | None:
    """The sampled token's logprob from one position of TRL's `logprobs[i][t]` (rank-ordered, the sampled token
    first), or None where vLLM gave none: TRL's `None` for a NaN, a NaN itself, or an empty position."""
    if per_token is None or len(per_token) == 0 or per_token[0] is None:
        return None
    value = float(per_token[0])
    return None if math.isnan(value) else value
