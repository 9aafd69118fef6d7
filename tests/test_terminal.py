"""The tmux terminal in a real container: keystrokes, new-output isolation, C-c, exit status, truncation.
One container for the module; each test opens its own tmux session in it."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from termagent.protocol import Command
from termagent.terminal import TerminalConfig, TmuxTerminal

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).parent / "agent" / "fixtures" / "count-lines"
_sessions = itertools.count()


@pytest.fixture(scope="module")
def trial(base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task

    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    with sandbox.trial(load_task(FIXTURE), agent_name="terminal-test") as live:
        live.deadline = time.monotonic() + 3600  # these tests drive the container without a runner
        yield live


@pytest.fixture
def terminal(trial):
    term = TmuxTerminal(trial, TerminalConfig(session=f"t{next(_sessions)}"))
    term.start()
    yield term
    term.close()


def test_start_shows_a_prompt_and_new_output_is_isolated(trial):
    term = TmuxTerminal(trial, TerminalConfig(session="iso"))
    screen = term.start()
    assert screen.rstrip().endswith("#")  # root's prompt in /app, and nothing else of ours
    first = term.run([Command("echo first-$((40+2))\n", 5)])
    assert first.incremental and "first-42" in first.text
    second = term.run([Command("echo second-$((1+1))\n", 5)])
    assert second.incremental and "second-2" in second.text
    assert "first-42" not in second.text  # only what is new since the last capture
    assert second.text.splitlines()[0].endswith("echo second-$((1+1))")  # starts at the command line
    term.close()


def test_start_waits_for_the_prompt_drawn_after_the_prompt_hook(trial):
    # The exit-status hook (PROMPT_COMMAND) runs before bash prints PS1; here PS1 takes 1 s to expand, so a
    # start() that returned as soon as the hook ran would capture a blank screen (as CI once saw, under load).
    shell = "env PS1='$(sleep 1)slow-prompt$ ' bash --norc --noprofile"
    term = TmuxTerminal(trial, TerminalConfig(session="slow-ps1", shell=shell))
    screen = term.start()
    assert screen.rstrip().endswith("slow-prompt$")
    term.close()


def test_ctrl_c_interrupts_sleep(terminal):
    started = terminal.run([Command("sleep 30\n", 0.5)])
    assert started.rc is None  # nothing finished yet
    interrupted = terminal.run([Command("C-c", 2)])
    assert "^C" in interrupted.text and interrupted.rc == 130
    after = terminal.run([Command("echo alive\n", 5)])
    assert "alive" in after.text and after.rc == 0


def test_exit_status_recorded_without_changing_the_screen(terminal):
    failed = terminal.run([Command("ls /nonexistent-dir\n", 5)])
    assert failed.rc == 2
    ok = terminal.run([Command("PS1='[$?] \\$ '\n", 2), Command("false\n", 2)])
    assert ok.rc == 1
    assert ok.text.rstrip().endswith("[1] #")  # $? seen by PS1 is the command's, not our hook's
    shown = terminal.run([Command("env | grep -c PROMPT_COMMAND; echo \"${PS1}\"\n", 5)])
    assert "\n0\n" in shown.text  # not exported to the programs the agent runs
    assert "termagent" not in shown.text
    nothing = terminal.run([Command("", 0.2)])
    assert nothing.rc is None  # no command finished this turn


def test_keys_literal_text_and_paste_buffer(terminal):
    # A key name is pressed: Up recalls the last command, Enter runs it again.
    terminal.run([Command("echo again\n", 5)])
    recalled = terminal.run([Command("Up", 0.3), Command("Enter", 5)])
    assert recalled.text.count("again") >= 2
    # Text that looks like a key inside a longer string is typed literally.
    literal = terminal.run([Command("echo 'C-c Enter'\n", 5)])
    assert "C-c Enter" in literal.text.splitlines()[-2]
    # Long keystrokes go through a paste buffer and arrive intact.
    payload = "x" * 5000
    pasted = terminal.run([Command(f"printf '%s' '{payload}' | wc -c\n", 5)])
    assert "5000" in pasted.text.split("\n")[-2]


def test_large_output_is_truncated_head_and_tail(trial):
    term = TmuxTerminal(trial, TerminalConfig(session="big", max_output_bytes=2000))
    term.start()
    out = term.run([Command("seq 1 3000\n", 10)])
    assert out.truncated and out.incremental
    assert "\n1\n2\n3\n" in out.text and "\n2999\n3000\n" in out.text
    assert "omitted" in out.text and len(out.text.encode()) < 2200
    term.close()


def test_full_screen_program_falls_back_to_the_screen(terminal):
    out = terminal.run([Command("less /app/notes.txt\n", 1)])
    assert not out.incremental and "alpha" in out.text
    back = terminal.run([Command("q", 1)])
    assert back.incremental or "alpha" not in back.text


def test_turn_overhead(terminal):
    """Not an assertion on time: prints the per-turn cost of send + wait + capture for the report."""
    n = 5
    start = time.monotonic()
    for _ in range(n):
        out = terminal.run([Command("true\n", 5)])
        assert out.rc == 0
    per_turn = (time.monotonic() - start) / n
    print(f"\nterminal per-turn overhead (send + idle wait + capture, `true`): {per_turn * 1000:.0f} ms")


def test_multi_line_keystrokes_wait_for_every_line(terminal):
    # The first line draws a prompt at once; the second keeps bash itself busy (so bash stays the
    # foreground program): the early return must still wait for it.
    busy = "for i in $(seq 1 300000); do :; done; echo second-$((40+2))"
    out = terminal.run([Command(f"echo first\n{busy}\n", 20.0)])
    assert "\nfirst\n" in out.text and "second-42" in out.text and out.rc == 0


@pytest.mark.parametrize("flake", ["empty", "headless"])
def test_a_capture_that_comes_back_empty_or_cut_is_read_again(trial, flake):
    """Under load `docker exec` has returned the capture empty (exit 0), and once cut through its first
    separator: the old parser then read the screen as the header (`int('root@sandbox:/app#')`). The read-only
    capture repeats."""
    import dataclasses

    from termagent.terminal import _SEPARATOR

    def altered(output: str) -> str:  # what each flake looked like
        return "" if flake == "empty" else output.split(f"{_SEPARATOR}\n", 1)[1]

    term = TmuxTerminal(trial, TerminalConfig(session=flake))
    term.start()
    real_exec, flaked = trial.exec, []

    def exec_flaking_once(cmd, *args, **kwargs):
        result = real_exec(cmd, *args, **kwargs)
        if "capture-pane" in cmd and _SEPARATOR in result.output and not flaked:
            flaked.append(result)
            return dataclasses.replace(result, output=altered(result.output))
        return result

    trial.exec = exec_flaking_once
    try:
        out = term.run([Command("echo again-$((20+1))\n", 5)])
    finally:
        trial.exec = real_exec
    assert flaked and "again-21" in out.text
    term.close()
