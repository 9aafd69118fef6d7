"""Keep the conversation inside the model's context window.

Tokens are counted with the policy's own tokenizer and chat template (`policy.count_tokens`) against
`config.context_limit`, else `policy.context_limit`, else the limit a context-length error stated: never
guessed. When fewer than `config.reserve_tokens` stay free for the reply, the context is reduced:

- summarize   (Terminus-2's way) the model writes a summary of its progress, having seen the latest
              observation too; the conversation restarts as one user message: the task prompt, that
              summary and the current screen. If no summary can be made, the oldest turns are dropped.
- drop_oldest the oldest (assistant reply, observation) pairs are dropped until it fits; the task prompt
              always stays, and so do the last reply and the observation that answers it.
- end         nothing is reduced: the episode ends with ended_by "context_limit" (multi-turn RL).
- last resort (summarize / drop_oldest, as Terminus-2's): restart from the task prompt and the current screen.

Every reduction is appended to the record's `summarizations`, whatever the strategy.
"""

from __future__ import annotations

from collections.abc import Callable

from termagent.agent.config import AgentConfig
from termagent.agent.episode import EpisodeRecord
from termagent.policy import ContextLengthExceeded, Policy
from termagent.protocol import SUMMARY_REQUEST, format_summary_handoff, format_terminal_output, limit_output

Screen = Callable[[], str]  # the visible terminal screen now

RESTART_NOTE = ("\n\nYour earlier turns were removed to fit the context window and no summary of them could "
                "be made. Look at the terminal to see where things stand, then continue the task.\n\n")


class ContextOverflow(RuntimeError):
    """The conversation does not fit the context and nothing is left to drop or summarize."""


class ContextLimitReached(RuntimeError):
    """context_strategy "end": the context is full, so the episode ends (ended_by "context_limit")."""


class ContextManager:
    def __init__(self, policy: Policy, config: AgentConfig, record: EpisodeRecord, screen: Screen | None = None,
                 protocol=None):
        self.protocol = protocol  # None: the termagent texts (its screen label and limit)
        self.policy = policy
        self.config = config
        self.record = record
        self.screen = screen

    def limit(self, stated: int | None = None) -> int | None:
        return self.config.context_limit or getattr(self.policy, "context_limit", None) or stated

    def count(self, history: list[dict], pending: str) -> int:
        return self.policy.count_tokens([*history, {"role": "user", "content": pending}])

    def fit(self, history: list[dict], pending: str, task_prompt: str, *, turn: int) -> tuple[list[dict], str]:
        """Reduce the context before a call when the reply would not have room; else leave it as is."""
        limit = self.limit()
        if limit is None or self.count(history, pending) + self.config.reserve_tokens <= limit:
            return history, pending
        return self.reduce(history, pending, task_prompt, turn=turn, trigger="proactive")

    def reduce(self, history: list[dict], pending: str, task_prompt: str, *, turn: int, trigger: str,
               limit: int | None = None) -> tuple[list[dict], str]:
        """Shrink the context by the configured strategy (after a context-length error, or proactively)."""
        limit = self.limit(limit)
        if self.config.context_strategy == "end":
            raise ContextLimitReached(f"turn {turn}: the context is full ({trigger}, limit {limit} tokens)")
        budget = None if limit is None else limit - self.config.reserve_tokens
        before = self.count(history, pending)
        event = {"turn": turn, "trigger": trigger, "strategy": self.config.context_strategy,
                 "context_limit": limit, "tokens_before": before, "messages_before": len(history) + 1}
        reduced = None
        if self.config.context_strategy == "summarize":
            reduced = self._summarize(history, pending, task_prompt, limit, event)
        if reduced is None:
            reduced = self._drop_oldest(history, pending, budget, event)
        if reduced is None:
            reduced = self._restart(pending, task_prompt, budget, event)
        if reduced is None:
            raise ContextOverflow(
                f"the conversation ({before} tokens) does not fit the context ({limit} tokens, "
                f"{self.config.reserve_tokens} kept for the reply) and nothing is left to drop or summarize")
        event.update(tokens_after=self.count(*reduced), messages_after=len(reduced[0]) + 1)
        self.record.data["summarizations"].append(event)
        return reduced

    def _drop_oldest(self, history: list[dict], pending: str, budget: int | None,
                     event: dict) -> tuple[list[dict], str] | None:
        # history = [task, a1, o1, a2, o2, ..., ak]: dropping (a_i, o_i) keeps the roles alternating.
        history = list(history)
        dropped = 0
        while len(history) >= 4:
            if budget is not None and self.count(history, pending) <= budget:
                break
            if budget is None and dropped >= max(1, (len(history) - 2) // 4):
                break  # no known limit: drop half of the droppable pairs
            del history[1:3]
            dropped += 1
        event["dropped_pairs"] = dropped
        return (history, pending) if dropped else None

    def _summarize(self, history: list[dict], pending: str, task_prompt: str, limit: int | None,
                   event: dict) -> tuple[list[dict], str] | None:
        if len(history) < 2 or self.screen is None:
            event["summary_error"] = "nothing to summarize yet" if len(history) < 2 else "no terminal"
            return None
        max_tokens = self.config.summary_max_tokens or self.config.max_output_tokens
        request = self._summary_request(history, pending, limit, max_tokens)
        if request is None:
            event["summary_error"] = "the summary request itself does not fit the context"
            return None
        try:
            generation = self.policy.generate([request], max_tokens=max_tokens,
                                              temperature=self.config.temperature, seed=self.config.seed)[0]
        except ContextLengthExceeded as error:
            event["summary_error"] = f"context length exceeded: {error}"
            return None
        self.record.count_tokens(generation)
        event.update(summary=generation.text, summary_finish_reason=generation.finish_reason,
                     summary_prompt_tokens=generation.prompt_tokens,
                     summary_completion_tokens=generation.completion_tokens,
                     summary_input_messages=len(request))
        if not generation.text.strip():
            event["summary_error"] = "empty summary"
            return None
        # The summary saw the latest observation; the screen shows where things stand now.
        screen = self._screen_text()
        return [], task_prompt + format_summary_handoff(generation.text) + "\n\n" + screen

    def _screen_text(self) -> str:
        """The visible screen as an observation of the episode's protocol shows it."""
        if self.protocol is not None:
            return self.protocol.screen_text(self.screen())
        return format_terminal_output(limit_output(self.screen(), self.config.max_observation_bytes), False)

    def _summary_request(self, history: list[dict], pending: str, limit: int | None,
                         max_tokens: int) -> list[dict] | None:
        """history + [latest observation + the summary request], shrunk to fit: the oldest pairs go
        first, then the observation is cut to its head and tail."""
        request = [*history, {"role": "user", "content": f"{pending}\n\n{SUMMARY_REQUEST}"}]
        if limit is None:
            return request

        def fits(messages: list[dict]) -> bool:
            return self.policy.count_tokens(messages) + max_tokens <= limit

        while not fits(request) and len(request) >= 5:
            del request[1:3]
        if not fits(request):
            request[-1] = {"role": "user", "content": f"{limit_output(pending, 1000)}\n\n{SUMMARY_REQUEST}"}
        return request if fits(request) else None

    def _restart(self, pending: str, task_prompt: str, budget: int | None,
                 event: dict) -> tuple[list[dict], str] | None:
        if self.screen is None:
            return None
        screen = self._screen_text()
        restarted = task_prompt + RESTART_NOTE + screen
        if restarted == pending or (budget is not None and self.count([], restarted) > budget):
            return None  # no progress possible
        event["restarted"] = True
        return [], restarted
