"""Token-in/token-out for multi-turn RL: one episode's trajectory as a single token buffer.

`TokenBufferPolicy` is the policy one TerminusAgent episode talks to during an MT-GRPO rollout. The agent loop
is the evaluation loop, unchanged: it still passes chat messages. The buffer ignores their rendering except
for what is new — the latest observation — and continues its own ids:

    prompt_ids      the first turn's prompt, rendered once by the chat template
    completion_ids  turn 1's sampled ids, exactly as sampled (env_mask 1)
                    + the environment suffix: end of the assistant turn when the model did not sample it,
                      the user turn holding the observation, the next generation prompt (env_mask 0)
                    + turn 2's sampled ids (env_mask 1) + ... ending on the last sampled token

The environment suffix comes from a fixed-base diff of the chat template (two renderings of a sentinel
conversation), so the model's own tokens are never decoded and re-encoded. Every turn after the first also
renders the messages the loop passed and compares them with the buffer (the drift counter): `clean` when the
ids agree, else `drift` with the first differing position. The buffer is what trains either way; the counter
says how far the message-rendered conversation (what an eval server sees) is from it.

The context a trajectory may use is `prompt + max_completion_tokens` (TRL's max_completion_length, the whole
trajectory budget, environment tokens included); `count_tokens` reports the buffer's own length, so the
agent's context manager (context_strategy "end") ends the episode as "context_limit" before a call could
overrun it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from termagent.policy.base import Generation, Policy, PolicyError

_USER, _ASSISTANT, _OBSERVATION = "\x00u\x00", "\x00a\x00", "\x00o\x00"


@dataclass(frozen=True)
class ChatSuffix:
    """Text pieces of the chat template around an observation, from a fixed-base diff."""

    close_assistant: str  # after an assistant's content: "<|im_end|>\n" for Qwen3
    before_observation: str  # "<|im_start|>user\n"
    after_observation: str  # "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" (generation prompt)

    @classmethod
    def from_tokenizer(cls, tokenizer) -> ChatSuffix:
        base = [{"role": "user", "content": _USER}, {"role": "assistant", "content": _ASSISTANT}]
        text_base = tokenizer.apply_chat_template(base, tokenize=False)
        text_full = tokenizer.apply_chat_template([*base, {"role": "user", "content": _OBSERVATION}],
                                                  tokenize=False, add_generation_prompt=True)
        if not text_full.startswith(text_base) or text_base.count(_ASSISTANT) != 1:
            raise PolicyError("token buffer: the chat template does not extend a conversation by appending to "
                              "it (not prefix-preserving); multi-turn RL needs one that does")
        close = text_base[text_base.index(_ASSISTANT) + len(_ASSISTANT):]
        before, _, after = text_full[len(text_base):].partition(_OBSERVATION)
        return cls(close, before, after)


@dataclass
class TurnTokens:
    """One model call of the episode, in buffer coordinates (offsets into completion_ids)."""

    span: tuple[int, int]  # [start, end) of the sampled ids
    env_ids: int  # environment tokens appended before this turn (0 for the first)
    drift: str  # "first" | "clean" | "drift"
    drift_at: int | None = None  # first position where the message rendering differs from the buffer


@dataclass
class TokenBufferPolicy(Policy):
    """One episode's policy (not shared between episodes). `base` generates from token ids (a BatchingPolicy
    shared by the episodes of a rollout batch, or an HFPolicy)."""

    base: Policy
    suffix: ChatSuffix
    eos_ids: list[int]
    max_completion_tokens: int
    name: str = "policy"
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[TurnTokens] = field(default_factory=list)
    _messages: list[dict] | None = None  # what the last call was given, + its reply
    _opening: list[dict] | None = None  # the episode's first conversation: sent again, the trial was retried

    @property
    def context_limit(self) -> int | None:  # the trajectory budget once the prompt is known
        model_limit = self.base.context_limit
        if not self.prompt_ids:
            return model_limit
        budget = len(self.prompt_ids) + self.max_completion_tokens
        return budget if model_limit is None else min(model_limit, budget)

    def _tokenize(self, text: str) -> list[int]:
        return list(self.base.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _env_ids(self, observation: str) -> list[int]:
        ended = bool(self.completion_ids) and self.completion_ids[-1] in self.eos_ids
        close = self.suffix.close_assistant
        if ended:  # the model sampled the end-of-turn token itself: only what follows it is the environment's
            eos_text = self.base.tokenizer.decode([self.completion_ids[-1]])
            # another end token (<|endoftext|> where the template closes with <|im_end|>) stays the model's, and
            # the template's closing follows it as environment tokens (the drift counter shows the difference)
            close = close.removeprefix(eos_text)
        return self._tokenize(close + self.suffix.before_observation + observation + self.suffix.after_observation)

    def _extends(self, messages: list[dict]) -> bool:
        return (self._messages is not None and len(messages) == len(self._messages) + 1
                and messages[:-1] == self._messages and messages[-1].get("role") == "user")

    def _restart_on_retry(self, messages: list[dict]) -> None:
        """A retried trial (run_trials reruns an infrastructure failure with the same agent) opens with the episode's
        first conversation again: the abandoned attempt's tokens are dropped, and the buffer holds the new one's."""
        if self.prompt_ids and messages == self._opening:
            self.prompt_ids, self.completion_ids, self.env_mask, self.logprobs, self.turns = [], [], [], [], []
            self._messages = None

    def count_tokens(self, messages: list[dict]) -> int:
        self._restart_on_retry(messages)
        if not self.prompt_ids:
            return self.base.count_tokens(messages)
        if self._extends(messages):
            return len(self.prompt_ids) + len(self.completion_ids) + len(self._env_ids(messages[-1]["content"]))
        raise PolicyError("token buffer: the conversation no longer extends the trajectory (a context reduction? "
                          "multi-turn RL runs with agent context_strategy 'end')")

    def generate(self, messages_batch: list[list[dict]], *, max_tokens: int, temperature: float,
                 seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        if len(messages_batch) != 1:
            raise PolicyError("token buffer: one conversation per call (one episode per buffer)")
        messages = messages_batch[0]
        self._restart_on_retry(messages)
        if not self.prompt_ids:
            self._opening = list(messages)
            self.prompt_ids = list(self.base.prompt_ids(messages))
            env, drift, drift_at = [], "first", None
        else:
            if not self._extends(messages):
                raise PolicyError("token buffer: the conversation no longer extends the trajectory")
            env = self._env_ids(messages[-1]["content"])
            self.completion_ids += env
            self.env_mask += [0] * len(env)
            self.logprobs += [0.0] * len(env)
            rendered = list(self.base.prompt_ids(messages))
            buffer = self.prompt_ids + self.completion_ids
            drift_at = next((i for i, (a, b) in enumerate(zip(rendered, buffer)) if a != b),
                            None if len(rendered) == len(buffer) else min(len(rendered), len(buffer)))
            drift = "clean" if drift_at is None else "drift"
        context = self.prompt_ids + self.completion_ids
        [generation] = self.base.generate_ids([context], max_tokens=max_tokens, temperature=temperature,
                                              seed=seed, top_p=top_p)
        start = len(self.completion_ids)
        self.completion_ids += generation.completion_ids
        self.env_mask += [1] * len(generation.completion_ids)
        self.logprobs += list(generation.logprobs)
        self.turns.append(TurnTokens(span=(start, len(self.completion_ids)), env_ids=len(env), drift=drift,
                                     drift_at=drift_at))
        self._messages = [*messages, {"role": "assistant", "content": generation.text}]
        return [generation]

    @property
    def drift_counts(self) -> dict[str, int]:
        counts = {"clean": 0, "drift": 0}
        for turn in self.turns:
            if turn.drift in counts:
                counts[turn.drift] += 1
        return counts
