"""Entity renaming of demonstrations: one consistent bijection of the families' name pools per copy."""

from __future__ import annotations

import random

import pytest

from termagent.protocol import render_initial_prompt
from termagent.train.augment import entity_names, rename_conversation, with_renamed_copies

TASK = "Count the lines of `/app/violet_21.log` that contain `basil` and write the number to `/app/maple_48.txt`."
REPLY = ('{"analysis": "Fresh shell.", "plan": "Count.", "commands": [{"keystrokes": '
         '"grep -c basil /app/violet_21.log > /app/maple_48.txt\\n", "duration": 1.0}], "task_complete": false}')
OUTPUT = "New Terminal Output:\nroot@sandbox:/app# cat /app/violet_21.log\nbasil cedar\nviolet_21 basil\nroot@sandbox:/app# "
CONVERSATION = [{"role": "user", "content": render_initial_prompt(TASK, "root@sandbox:/app#")},
                {"role": "assistant", "content": REPLY}, {"role": "user", "content": OUTPUT}]


def test_names_are_replaced_consistently_across_every_message():
    renamed = rename_conversation(CONVERSATION, random.Random(0))
    task_names = entity_names(TASK)
    assert task_names == {"violet_21", "basil", "maple_48"}
    new_task = renamed[0]["content"].split("Task:\n")[1].split("\n")[0]
    new_names = entity_names(new_task)
    assert len(new_names) == 3 and new_names != task_names
    # the same bijection everywhere: the reply types exactly the renamed task's names, the output shows them
    assert entity_names(renamed[1]["content"]) == new_names
    old_to_new = dict(zip(sorted(task_names, key=TASK.index), sorted(new_names, key=new_task.index)))
    assert f"cat /app/{old_to_new['violet_21']}.log" in renamed[2]["content"]
    assert f"\n{old_to_new['violet_21']} {old_to_new['basil']}\n" in renamed[2]["content"]
    assert renamed[1]["content"] == REPLY.replace("violet_21", "\0v").replace("basil", "\0b").replace(
        "maple_48", "\0m").replace("\0v", old_to_new["violet_21"]).replace("\0b", old_to_new["basil"]).replace(
        "\0m", old_to_new["maple_48"])


def test_the_protocol_text_is_never_renamed():
    renamed = rename_conversation(CONVERSATION, random.Random(1))
    fixed = render_initial_prompt("", "").split("Task:")[0]
    assert renamed[0]["content"].startswith(fixed)


def test_copies_are_added_after_the_originals_and_are_reproducible():
    out = with_renamed_copies([CONVERSATION], 3, seed=0)
    assert len(out) == 4 and out[0] is CONVERSATION
    assert len({o[1]["content"] for o in out}) == 4  # every copy draws its own names
    assert out == with_renamed_copies([CONVERSATION], 3, seed=0)
    with pytest.raises(ValueError, match="rename_copies"):
        with_renamed_copies([CONVERSATION], -1, seed=0)


def test_each_window_pass_draws_its_own_renaming_so_no_renamed_window_repeats():
    from termagent.train.sft import SFTParams, window_conversations

    def params(**kw):
        return SFTParams(**{"datasets": ["x.jsonl"], "rename_copies": 3, "window_epochs": 3.0, **kw})

    first = with_renamed_copies([CONVERSATION], 3, seed=0)
    convs, epochs, sets = window_conversations([CONVERSATION], first, params(rename_each_pass=True))
    assert (len(convs), epochs, sets) == (12, 1.0, 3) and convs[:4] == first  # pass 0 is the copies the rest uses
    replies = [c[1]["content"] for c in convs]
    assert replies.count(REPLY) == 3 and len(set(replies)) == 10  # the original each pass, 9 distinct copies
    # a fractional pass: 2.5 passes are 3 sets, 5/6 of their windows
    assert window_conversations([CONVERSATION], first, params(rename_each_pass=True, window_epochs=2.5))[1:] == (2.5 / 3, 3)
    # off: one set, every pass repeats it
    assert window_conversations([CONVERSATION], first, params()) == (first, 3.0, 1)
