"""Context reduction without a container: the last resort and the error when nothing can shrink."""

from __future__ import annotations

import pytest

from termagent.agent import AgentConfig, ContextManager, ContextOverflow, EpisodeRecord


class CharPolicy:
    """One token per character: its own exact tokenizer. No generation is needed here."""

    name = "chars"
    context_limit = 400

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages)

    def generate(self, *args, **kwargs):
        raise AssertionError("not called")


def manager(strategy: str, screen=None) -> ContextManager:
    record = EpisodeRecord.start(task_id="t", attempt=0, model="chars", agent="terminus", config={})
    config = AgentConfig(max_output_tokens=50, context_strategy=strategy)
    return ContextManager(CharPolicy(), config, record, screen=screen)


def test_drop_oldest_keeps_the_task_and_the_last_turn():
    history = [{"role": "user", "content": "T" * 100}]
    for i in range(4):
        history += [{"role": "assistant", "content": f"a{i}" * 20}, {"role": "user", "content": f"o{i}" * 20}]
    history.append({"role": "assistant", "content": "last"})
    cm = manager("drop_oldest")
    reduced, pending = cm.fit(history, "observation", "T" * 100, turn=5)
    assert reduced[0] == history[0] and reduced[-1] == history[-1] and pending == "observation"
    assert cm.count(reduced, pending) + 50 <= 400
    event = cm.record.data["summarizations"][0]
    assert event["dropped_pairs"] >= 1 and event["tokens_after"] < event["tokens_before"]


def test_restart_from_task_and_screen_when_nothing_can_be_dropped():
    cm = manager("drop_oldest", screen=lambda: "root@sandbox:/app#")
    history = [{"role": "user", "content": "T" * 50}, {"role": "assistant", "content": "x" * 100}]
    reduced, pending = cm.fit(history, "o" * 300, "T" * 50, turn=1)
    assert reduced == [] and pending.startswith("T" * 50) and "root@sandbox:/app#" in pending
    assert cm.record.data["summarizations"][0]["restarted"]


def test_overflow_when_even_the_task_prompt_does_not_fit():
    cm = manager("summarize", screen=lambda: "$")
    with pytest.raises(ContextOverflow, match="does not fit"):
        cm.fit([], "T" * 500, "T" * 500, turn=0)


def test_strategy_end_reduces_nothing_and_ends_the_episode():
    from termagent.agent.context import ContextLimitReached

    cm = manager("end", screen=lambda: "$")
    history = [{"role": "user", "content": "T" * 50}, {"role": "assistant", "content": "x" * 100}]
    assert cm.fit(history, "o" * 10, "T" * 50, turn=1) == (history, "o" * 10)  # fits: untouched
    with pytest.raises(ContextLimitReached, match="context is full"):
        cm.fit(history, "o" * 300, "T" * 50, turn=1)
    assert cm.record.data["summarizations"] == []  # nothing was summarized or dropped
