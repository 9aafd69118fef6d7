"""Settings of the Terminus episode loop (the `agent:` section of params.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from termagent.protocol import MAX_OUTPUT_BYTES


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = 8  # model calls per episode (parse errors and cut-off replies count)
    max_output_tokens: int = 192  # sent as max_tokens on every call; a longer reply stops with "length"
    temperature: float = 0.0  # greedy
    # End the episode after this many replies in a row that ran nothing (a hard parse error, or cut off at
    # max_output_tokens): ended_by "failed_replies", and the verifier grades the container as it is. None:
    # no such limit (Terminus-2). A model that writes no usable reply three times running has given up; the
    # rest of its turn budget only costs decoding (the random base model writes max_output_tokens every turn).
    max_failed_replies: int | None = 2
    seed: int | None = None  # passed to the policy (reproducible sampling where the backend honours it)
    # A stuck episode ends early (ended_by "stuck") instead of holding a slot until the task's agent timeout:
    # the same keystrokes sent this many replies in a row, or the terminal still busy (no prompt came back:
    # a command blocks it) after this many turns in a row. None: no such check (Terminus-2).
    max_repeats: int | None = 3
    max_blocked_turns: int | None = 3
    # Context management. The limit is the policy's own (its tokenizer and model) unless overridden here;
    # when neither knows it, only a context-length error from the backend triggers a reduction.
    context_limit: int | None = None
    # end: no reduction at all, the episode ends as "context_limit" (multi-turn RL: a trajectory is one token
    # buffer, which a summary or a dropped turn would break)
    context_strategy: Literal["summarize", "drop_oldest", "end"] = "summarize"
    # Reduce the context when fewer than this many tokens stay free for the reply (None: max_output_tokens).
    min_free_tokens: int | None = None
    summary_max_tokens: int | None = None  # reply budget of the summary call (None: max_output_tokens)
    max_observation_bytes: int = MAX_OUTPUT_BYTES  # terminal output shown per turn (head + tail)
    deadline_margin_sec: float = 2.0  # stop this long before the trial's deadline, so we end cleanly
    pane_width: int = 160
    pane_height: int = 40
    # The prompt/observation texts and the reply parser (termagent/protocol/protocols.py): "termagent" (our
    # wording) | "harbor-terminus-2" (Harbor's terminus-2, every text read from the installed Harbor package
    # at run time: set it wherever the eval is Harbor's terminus-2, so training sends the eval's text).
    protocol: Literal["termagent", "harbor-terminus-2"] = "termagent"
    # harbor-terminus-2: where Harbor's files are (a harbor-X.whl, the `harbor` package dir or its
    # site-packages); null: $HARBOR_PACKAGE_DIR, else the `uv tool install harbor` environment, else `import harbor`.
    harbor_package: str | None = None
    harbor_version: str | None = "0.25.0"  # harbor-terminus-2: refuse any other release (null: any)

    def __post_init__(self) -> None:
        problems = []
        if self.max_turns < 1:
            problems.append(f"max_turns must be >= 1, got {self.max_turns}")
        if self.max_failed_replies is not None and self.max_failed_replies < 1:
            problems.append(f"max_failed_replies must be >= 1 or null, got {self.max_failed_replies}")
        for name in ("max_repeats", "max_blocked_turns"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1 or null, got {getattr(self, name)}")
        if self.max_output_tokens < 1:
            problems.append(f"max_output_tokens must be >= 1, got {self.max_output_tokens}")
        if self.context_strategy not in ("summarize", "drop_oldest", "end"):
            problems.append(f"context_strategy must be 'summarize', 'drop_oldest' or 'end', got {self.context_strategy!r}")
        if self.context_limit is not None and self.context_limit < 1:
            problems.append(f"context_limit must be a positive number of tokens, got {self.context_limit}")
        if self.protocol not in ("termagent", "harbor-terminus-2"):
            problems.append(f"protocol must be 'termagent' or 'harbor-terminus-2', got {self.protocol!r}")
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def reserve_tokens(self) -> int:
        return self.min_free_tokens if self.min_free_tokens is not None else self.max_output_tokens

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
