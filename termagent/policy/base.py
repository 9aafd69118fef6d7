"""What every generation backend returns and promises.

A policy turns a batch of chat conversations into one completion each. The agent loop, the
demonstration builder and multi-turn RL all talk to a `Policy`, never to a backend directly, so
that evaluation and training go through the same code. `termagent.policy.spec` says which one to build
(`make_policy`); this module knows no backend.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal, Self

FinishReason = Literal["stop", "length"]


@dataclass
class Generation:
    """One completion. Token ids and logprobs are filled in only by backends that see them (hf)."""

    text: str
    finish_reason: str  # "stop" (EOS / stop string) | "length" (max_tokens hit); servers may pass others
    prompt_tokens: int
    completion_tokens: int
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None  # includes the EOS token when the model emitted one
    # one per completion id: log softmax(logits / temperature); None for a token the backend could not score
    # (vLLM's NaN: termagent.policy.trl_vllm)
    logprobs: list[float | None] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class PolicyError(RuntimeError):
    """A backend failed in a way retrying will not fix (bad spec, bad request, exhausted replay)."""


class ContextLengthExceeded(PolicyError):
    """The prompt does not fit the model's context. `limit` is the server's stated maximum when known."""

    def __init__(self, message: str, limit: int | None = None):
        super().__init__(message)
        self.limit = limit


class Policy:
    """The interface the agent codes against.

    `context_limit` is the model's real context size in tokens (None when the backend cannot know it:
    then only server errors say the context is full). `count_tokens` uses the policy's own tokenizer
    and chat template, generation prompt included.
    """

    name: str = "policy"
    context_limit: int | None = None

    def generate(
        self,
        messages_batch: list[list[dict]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None = None,
        top_p: float = 1.0,
    ) -> list[Generation]:
        raise NotImplementedError

    def count_tokens(self, messages: list[dict]) -> int:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the backend holds (HTTP connections, model memory)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TokenPolicy(Policy):
    """A policy that renders messages to token ids itself and generates from ids (token-in/token-out): `generate`
    and `count_tokens` follow from `prompt_ids` and `generate_ids`."""

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        raise NotImplementedError

    def generate_ids(self, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                     seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        raise NotImplementedError

    def count_tokens(self, messages: list[dict]) -> int:
        return len(self.prompt_ids(messages))

    def generate(self, messages_batch: list[list[dict]], *, max_tokens: int, temperature: float,
                 seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        prompts = [self.prompt_ids(messages) for messages in messages_batch]
        return self.generate_ids(prompts, max_tokens=max_tokens, temperature=temperature, seed=seed, top_p=top_p)
