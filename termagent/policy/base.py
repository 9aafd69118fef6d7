"""What every generation backend returns and promises.

A policy turns a batch of chat conversations into one completion each. The agent loop, the
demonstration builder and multi-turn RL all talk to a `Policy`, never to a backend directly, so
that evaluation and training go through the same code.

`make_policy("hf:DIR[,adapter=DIR]" | "openai:URL[,model=NAME,...]" | "replay:FILE", **kw)` builds one;
options after the first comma are `key=value` pairs, and keyword arguments override them.
"""

from __future__ import annotations

import re
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


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """"openai:http://h:8000/v1,model=m" -> ("openai", "http://h:8000/v1", {"model": "m"})."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise PolicyError(f"policy spec {spec!r}: expected KIND:TARGET, e.g. hf:models/base, "
                          "openai:http://127.0.0.1:8000/v1, replay:completions.jsonl")
    target, *options = rest.split(",")
    opts: dict[str, str] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or not re.fullmatch(r"[a-z_]+", key.strip()):
            raise PolicyError(f"policy spec {spec!r}: option {option!r} is not key=value")
        opts[key.strip()] = value.strip()
    return kind, target, opts


def make_policy(spec: str, **kw) -> Policy:
    """Build a policy from its spec. Keyword arguments (e.g. model=, tokenizer=, context_limit=)
    override the spec's options; None values are ignored so CLI flags can be passed through as they are."""
    kind, target, opts = parse_spec(spec)
    opts.update({k: v for k, v in kw.items() if v is not None})
    if kind == "hf":
        from termagent.policy.hf import HFPolicy

        return HFPolicy(target, **opts)
    if kind == "openai":
        from termagent.policy.openai_compat import OpenAIPolicy

        return OpenAIPolicy(target, **opts)
    if kind == "replay":
        from termagent.policy.replay import ReplayPolicy

        return ReplayPolicy(target, **opts)
    raise PolicyError(f"policy spec {spec!r}: unknown kind {kind!r} (hf, openai, replay)")
