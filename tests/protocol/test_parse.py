"""The Terminus-2 reply parser: hard errors vs warnings, the two auto-fixes, and property tests."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from termagent.protocol import AgentResponse, Command, parse_response, render_response
from termagent.protocol.parse import FIX_CLOSE_BRACES, FIX_EXTRACT_JSON

GOOD = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\n", "duration": 0.1}],
        "task_complete": False}


def reply(**changes):
    data = {**GOOD, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def test_valid_reply_parses_without_warnings():
    result = parse_response(reply())
    assert result.ok and not result.errors and not result.warnings and not result.fixes
    assert result.response.commands == (Command("ls\n", 0.1),)
    assert result.response.task_complete is False


def test_hard_errors_give_no_response():
    cases = {
        "no JSON at all": "I will run ls now",
        '{"analysis": ': "{\"analysis\": ",
        "not an object": "[1, 2]",
        "missing plan": reply(plan=...),
        "missing commands": reply(commands=...),
        "commands not a list": reply(commands="ls\n"),
        "command not an object": reply(commands=["ls\n"]),
        "keystrokes missing": reply(commands=[{"duration": 1}]),
        "keystrokes not a string": reply(commands=[{"keystrokes": ["ls"], "duration": 1}]),
    }
    for name, text in cases.items():
        result = parse_response(text)
        assert not result.ok and result.response is None and result.errors, name


def test_error_messages_name_the_problem():
    assert "plan" in parse_response(reply(plan=...)).errors[0]
    assert "'commands' must be a list" in parse_response(reply(commands={})).errors[0]
    assert "command 2" in parse_response(reply(commands=[{"keystrokes": "a\n"}, {"duration": 1}])).errors[0]


def test_warnings_keep_the_reply():
    result = parse_response(reply(commands=[{"keystrokes": "ls\n"}, {"keystrokes": "pwd\n", "duration": 99,
                                                                     "why": "x"}], extra="x"))
    assert result.ok
    assert result.response.commands == (Command("ls\n", 1.0), Command("pwd\n", 60.0))
    text = " | ".join(result.warnings)
    assert "no duration" in text and "clipped" in text and "extra" in text and "why" in text


def test_task_complete_spellings():
    for value in (True, "true", "True", "1", "yes", 1):
        assert parse_response(reply(task_complete=value)).response.task_complete is True, value
    for value in (False, "false", "no", 0, None):
        assert parse_response(reply(task_complete=value)).response.task_complete is False, value
    assert parse_response(reply(task_complete=...)).response.task_complete is False


def test_missing_newline_between_commands_is_a_warning_but_a_key_is_not():
    result = parse_response(reply(commands=[{"keystrokes": "ls", "duration": 1},
                                            {"keystrokes": "C-c", "duration": 1},
                                            {"keystrokes": "pwd\n", "duration": 1}]))
    assert result.ok and any("command 1 does not end with a newline" in w for w in result.warnings)
    assert not any("command 2" in w for w in result.warnings)


def test_truncated_after_a_complete_command_is_closed():
    text = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 0.1},'
    result = parse_response(text)
    assert result.ok and result.fixes == [FIX_CLOSE_BRACES]
    assert result.response.commands == (Command("ls\n", 0.1),)


def test_truncated_right_after_a_string_with_brackets_inside_is_closed():
    text = '{"analysis": "saw {x} and [y]", "plan": "p", "commands": [{"keystrokes": "echo \\"}\\"\\n"}'
    result = parse_response(text)
    assert result.ok and result.fixes == [FIX_CLOSE_BRACES]
    assert result.response.analysis == "saw {x} and [y]"
    assert result.response.commands[0].keystrokes == 'echo "}"\n'
    assert not parse_response('{"analysis": "a", "plan": "cut inside a str').ok


def test_json_after_prose_with_braces_is_extracted():
    text = "Plan: {first} look around.\n" + reply() + "\nDone {ok}"
    result = parse_response(text)
    assert result.ok and result.fixes == [FIX_EXTRACT_JSON] and result.warnings


# --- properties -------------------------------------------------------------------------------------

texts = st.text(max_size=80)
commands = st.lists(st.builds(Command, keystrokes=texts,
                              duration=st.floats(min_value=0, max_value=60, allow_nan=False)), max_size=4)
responses = st.builds(AgentResponse, analysis=texts, plan=texts, commands=commands.map(tuple),
                      task_complete=st.booleans())


@settings(max_examples=300, deadline=None)
@given(responses)
def test_render_then_parse_gives_the_response_back(response):
    for indent in (2, None):
        result = parse_response(render_response(response, indent=indent))
        assert result.ok and result.response == response and not result.errors
        assert not [w for w in result.warnings if "newline" not in w]  # newline hints only


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    result = parse_response(text)
    assert result.ok == (result.response is not None)
    assert result.ok or result.errors


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60), responses)
def test_valid_json_wrapped_in_prose_is_ok_with_a_warning(before, after, response):
    before, after = before + "\nHere is my answer:\n", "\nThat is all.\n" + after
    result = parse_response(before + render_response(response) + after)
    assert result.ok and result.response == response
    assert result.warnings


@settings(max_examples=300, deadline=None)
@given(responses, st.integers(min_value=1, max_value=3))
def test_truncated_closing_braces_are_fixed(response, n_closers):
    text = render_response(response)
    cut = text
    for _ in range(n_closers):  # drop up to n closing brackets (and the whitespace before them)
        stripped = cut.rstrip()
        if stripped and stripped[-1] in "}]":
            cut = stripped[:-1]
    result = parse_response(cut)
    assert result.ok and result.response == response
    assert FIX_CLOSE_BRACES in result.fixes


def test_a_leading_think_block_is_reasoning_not_reply():
    """A Qwen3-family reply opening with <think>...</think> (braces, even a decoy reply, inside) parses as the
    JSON after it, with no fix and no warning: GRPO's strict format (no `fixes`) scores it as valid."""
    decoy = json.dumps({**GOOD, "commands": [{"keystrokes": "rm -rf /app\n", "duration": 0.1}]})
    text = f"<think>\nThe shell shows {{nothing}}; maybe {decoy}? No: list first.\n</think>\n\n{reply()}"
    result = parse_response(text)
    assert result.ok and not result.fixes and not result.warnings
    assert result.response.commands == (Command("ls\n", 0.1),)
    # an empty think block (the template's own, if a model repeats it) is stripped the same way
    assert parse_response(f"<think>\n\n</think>\n\n{reply()}").to_dict() == parse_response(reply()).to_dict()


def test_an_unclosed_think_block_is_not_stripped():
    result = parse_response("<think>\nStill thinking about {braces")
    assert not result.ok and "no JSON" not in " ".join(result.errors)
