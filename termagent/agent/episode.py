"""The episode record (docs/design.md#trajectory): what the agent returns and `trajectory.json` holds.

    task_id, attempt, model, agent, config,
    turns[{index, messages_in, completion, finish_reason, prompt_tokens, completion_tokens, prompt_ids?,
           completion_ids?, logprobs?, parse_ok, warnings, errors, fixes, response, keystrokes, rc,
           task_complete, observation, terminal_incremental, t_start, t_end, gen_s, exec_s}],
    n_turns, tokens{in, out}, summarizations[...], error{class, message} | null,
    ended_by ("task_complete" | "max_turns" | "failed_replies" | "timeout" | "context_limit" | "error"), wall_s

`reward` and `rewards` are filled in by the caller after the verifier ran.

Storage: a turn's context is the previous turn's context plus a few new messages, so storing it whole
makes a record grow with the square of its turns (14 MB for 20 short tiny-model episodes). `messages_in`
and `prompt_ids` are therefore stored as deltas: `messages_in_base` (`prompt_ids_base`) counts the leading
items shared with the previous turn's messages_in + its reply (prompt_ids + completion_ids), and the field
holds the rest. Base 0 means the field is complete (the first turn, or a context rebuilt by a summary).
`expand_turns(record)` gives the full lists back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class EpisodeRecord:
    data: dict
    _t0: float = field(default_factory=time.monotonic)
    # The last turn's full messages_in and prompt_ids, for delta storage of the next turn.
    _turn_messages: list[dict] = field(default_factory=list)
    _turn_ids: list[int] = field(default_factory=list)
    _ids_turn: dict | None = None  # the last turn that recorded prompt ids

    @classmethod
    def start(cls, *, task_id: str, attempt: int, model: str, agent: str, config: dict) -> EpisodeRecord:
        return cls({
            "task_id": task_id, "attempt": attempt, "model": model, "agent": agent, "config": config,
            "turns": [], "n_turns": 0, "tokens": {"in": 0, "out": 0}, "summarizations": [],
            "error": None, "ended_by": None,
        })

    def new_turn(self, index: int, messages: list[dict]) -> dict:
        messages = [dict(m) for m in messages]
        previous = self.data["turns"][-1] if self.data["turns"] else None
        base = _shared_prefix(_context_messages(self._turn_messages, previous), messages)
        self._turn_messages = messages
        turn = {
            "index": index, "messages_in_base": base, "messages_in": messages[base:], "completion": None,
            "finish_reason": None, "prompt_tokens": None, "completion_tokens": None,
            "parse_ok": False, "warnings": [], "errors": [], "fixes": [], "response": None,
            "keystrokes": [], "rc": None, "task_complete": False, "observation": None,
            "terminal_incremental": None, "t_start": time.time(), "t_end": None, "gen_s": None, "exec_s": None,
        }
        self.data["turns"].append(turn)
        self.data["n_turns"] = len(self.data["turns"])
        return turn

    def add_generation(self, turn: dict, generation) -> None:
        turn.update(completion=generation.text, finish_reason=generation.finish_reason,
                    prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
                    gen_s=time.time() - turn["t_start"])
        prompt_ids = getattr(generation, "prompt_ids", None)
        if prompt_ids is not None:
            prompt_ids = list(prompt_ids)
            base = _shared_prefix(_context_ids(self._turn_ids, self._ids_turn), prompt_ids)
            turn["prompt_ids_base"], turn["prompt_ids"] = base, prompt_ids[base:]
            self._turn_ids, self._ids_turn = prompt_ids, turn
        for key in ("completion_ids", "logprobs"):
            value = getattr(generation, key, None)
            if value is not None:
                turn[key] = list(value)
        self.count_tokens(generation)

    def count_tokens(self, generation) -> None:
        self.data["tokens"]["in"] += int(generation.prompt_tokens or 0)
        self.data["tokens"]["out"] += int(generation.completion_tokens or 0)

    def fail(self, error: BaseException) -> None:
        self.data["error"] = {"class": type(error).__name__, "message": str(error)[:4000]}
        self.data["ended_by"] = "error"

    @property
    def ended_by(self) -> str | None:
        return self.data["ended_by"]

    @ended_by.setter
    def ended_by(self, value: str) -> None:
        self.data["ended_by"] = value

    def finish(self) -> dict:
        self.data["wall_s"] = round(time.monotonic() - self._t0, 3)
        if self.data["ended_by"] is None:
            self.data["ended_by"] = "error"
        return self.data


def _shared_prefix(previous: list, current: list) -> int:
    n = 0
    for a, b in zip(previous, current):
        if a != b:
            break
        n += 1
    return n


def _context_messages(messages_in: list[dict], turn: dict | None) -> list[dict]:
    """What a turn leaves in the chat: its messages, plus its reply when the model produced one."""
    if turn is None:
        return []
    if turn.get("completion") is None or turn.get("finish_reason") == "context_length":
        return list(messages_in)
    return [*messages_in, {"role": "assistant", "content": turn["completion"]}]


def _context_ids(prompt_ids: list[int], turn: dict | None) -> list[int]:
    if turn is None or turn.get("prompt_ids") is None:
        return []
    return [*prompt_ids, *(turn.get("completion_ids") or [])]


def expand_turns(record: dict) -> list[dict]:
    """The record's turns with `messages_in` and `prompt_ids` complete (copies; the record is untouched).
    Records written before delta storage (no `*_base` keys) come back as they are."""
    out: list[dict] = []
    previous: dict | None = None
    ids_turn: dict | None = None  # the last turn that had prompt ids
    messages: list[dict] = []
    ids: list[int] = []
    for turn in record.get("turns", []):
        full = dict(turn)
        context = _context_messages(messages, previous)
        messages = context[: turn.get("messages_in_base", 0)] + list(turn.get("messages_in") or [])
        full["messages_in"] = messages
        if turn.get("prompt_ids") is not None:
            context = _context_ids(ids, ids_turn)
            ids = context[: turn.get("prompt_ids_base", 0)] + list(turn["prompt_ids"])
            full["prompt_ids"] = ids
            ids_turn = turn
        full.pop("messages_in_base", None)
        full.pop("prompt_ids_base", None)
        previous = turn
        out.append(full)
    return out


def final_conversation(record: dict) -> list[dict]:
    """The chat as the model last saw it, with its last reply: the last turn's messages_in + completion
    (after a context reduction, earlier turns are not in it). [] for an episode without turns."""
    turns = [t for t in expand_turns(record) if t.get("completion") is not None]
    if not turns:
        return []
    last = turns[-1]
    return [*last["messages_in"], {"role": "assistant", "content": last["completion"]}]
