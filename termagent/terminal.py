"""A tmux session inside a trial's container: the terminal the agent types into.

Everything goes through `trial.exec` (a bash command line in the container), one exec per command sent
plus one per capture, so a turn costs a few round trips whatever the output size.

- Keystrokes follow Terminus-2: a string that is exactly a tmux key name ("C-c", "Enter", "Up") is
  pressed as that key, anything else is typed literally (`send-keys -l`); long text goes through a tmux
  paste buffer loaded from a file copied into the container.
- Exit status without touching the screen: the shell's PROMPT_COMMAND (handed to bash through the tmux
  server's environment, then un-exported so child processes never see it) writes "<counter> <$?>" to a
  file under /tmp/.termagent each time a prompt is drawn. PS1 and the screen are untouched. A new counter
  value after a turn means a command finished; its status is the turn's `rc`, else `rc` is None.
- Waiting: up to `duration` (never more than 60 s or past the deadline), returning early once the
  counter moved and bash is the foreground program again (the command finished).
- New output: the absolute row of the cursor at the last capture is remembered; the next capture starts
  at that row if it still holds what it held (else the history was cleared or a full-screen program
  runs) and otherwise falls back to the visible screen.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from termagent.protocol import MAX_DURATION_SEC, MAX_OUTPUT_BYTES, Command, is_tmux_key, limit_output

STATE_DIR = "/tmp/.termagent"
_SEPARATOR = "@@termagent-capture@@"
CAPTURE_ATTEMPTS = 3  # a capture that comes back empty is read again (it changes nothing)
log = logging.getLogger(__name__)


class TerminalError(RuntimeError):
    """The tmux session could not be started or driven."""


class TrialExpired(TerminalError):
    """The container behind the terminal was killed at the agent timeout (the runner's deadline): every later
    exec raises this, and the agent ends its episode as "timeout" instead of driving a removed container."""


@dataclass(frozen=True)
class TerminalConfig:
    session: str = "agent"
    width: int = 160
    height: int = 40
    history_limit: int = 100_000  # rows of scrollback: new output is isolated from it
    max_output_bytes: int = MAX_OUTPUT_BYTES  # per turn, head and tail kept
    paste_threshold_bytes: int = 2048  # longer keystrokes go through a paste buffer
    max_wait_sec: float = MAX_DURATION_SEC
    poll_sec: float = 0.05  # idle check period while waiting
    start_timeout_sec: float = 20.0
    shell: str = "bash --login"
    # How new output is told apart: "termagent" (the cursor-row mark below, text limited here) or "harbor"
    # (Harbor's TmuxSession.get_incremental_output: the whole scrollback is compared with the previous one;
    # the raw text is returned and the protocol labels and limits it, as terminus-2 does).
    capture: str = "termagent"


@dataclass
class TurnOutput:
    text: str  # the new output since the last capture, or the visible screen (incremental=False)
    incremental: bool
    rc: int | None  # exit status of the last command that finished since the last capture
    truncated: bool  # text was cut to max_output_bytes (head and tail kept)


class TmuxTerminal:
    def __init__(self, trial, config: TerminalConfig | None = None):
        self.trial = trial
        self.config = config or TerminalConfig()
        self.target = shlex.quote(self.config.session)
        self.state_dir = f"{STATE_DIR}/{self.config.session}"  # one per session: sessions never share a counter
        self._seq = 0  # prompt counter last seen
        self._captured_seq = 0  # prompt counter at the last capture
        self._last_rc: int | None = None
        self._mark_row: int | None = None  # absolute row (history + cursor_y) of the cursor at last capture
        self._mark_text = ""
        self._previous_buffer: str | None = None  # capture "harbor": the scrollback at the last capture
        self.started = False
        if self.config.capture not in ("termagent", "harbor"):
            raise ValueError(f"terminal capture must be 'termagent' or 'harbor', got {self.config.capture!r}")

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> str:
        """Start the session, wait for the first prompt, return the visible screen."""
        c = self.config
        # $? is kept for PS1 by re-raising it with `(exit ...)`: a prompt showing $? still shows the real one.
        hook = (f'__termagent_rc=$?; __termagent_n=$((__termagent_n+1)); '
                f'printf "%s %s\\n" "$__termagent_n" "$__termagent_rc" > {self.state_dir}/rc; '
                f'export -n PROMPT_COMMAND; (exit $__termagent_rc)')
        new_session = (f"tmux -f {self.state_dir}/tmux.conf new-session -d -s {self.target} "
                       f"-x {c.width} -y {c.height}")
        # The hook goes to this session only (-e, tmux >= 3.2); older tmux gets it from the server's
        # environment, which is then cleared so windows the agent opens itself do not inherit it.
        script = (
            f"mkdir -p {self.state_dir} && chmod 1777 {STATE_DIR} {self.state_dir} && rm -f {self.state_dir}/rc && "
            f"printf 'set -g history-limit {c.history_limit}\\n' > {self.state_dir}/tmux.conf && "
            f"{{ {new_session} -e PROMPT_COMMAND={shlex.quote(hook)} {shlex.quote(c.shell)} 2>/dev/null || "
            f"{new_session} {shlex.quote(c.shell)}; }} && "
            f"{{ tmux set-environment -g -u PROMPT_COMMAND 2>/dev/null; true; }} && "
            f"for i in $(seq {int(c.start_timeout_sec / 0.05)}); do "
            f"[ -s {self.state_dir}/rc ] && break; sleep 0.05; done; "
            # PROMPT_COMMAND runs before bash prints PS1, and tmux draws it later still: wait (2 s at most,
            # PS1 may be empty) until the cursor left the top-left corner, or the first capture can be blank.
            f"for i in $(seq 40); do [ \"$(tmux display -p -t {self.target} '#{{cursor_x}}#{{cursor_y}}')\" != 00 ] "
            f"&& break; sleep 0.05; done; cat {self.state_dir}/rc"
        )
        result = self.trial.exec(script, timeout=c.start_timeout_sec + 5,
                                 env={"PROMPT_COMMAND": hook, "TERM": "xterm-256color"})
        seq = _parse_seq(result.output.strip().splitlines()[-1:])
        if result.rc != 0 or seq is None:
            raise TerminalError(f"could not start tmux in the container (exit {result.rc}): "
                                f"{result.output[-2000:]}")
        self.started = True
        self._seq, self._last_rc = seq
        first = self.capture()
        return first.text

    def close(self) -> None:
        if self.started:
            self.trial.exec(f"tmux kill-session -t {self.target} 2>/dev/null", timeout=10)
            self.started = False

    # ---- input ---------------------------------------------------------------------------------------

    def send(self, keystrokes: str, duration: float = 0.0, deadline: float | None = None) -> float:
        """Send one command's keystrokes, then wait up to `duration` s (capped at 60 s and at `deadline`,
        a time.monotonic() value), returning early once the command finished. Returns the seconds waited."""
        wait = max(0.0, min(float(duration), self.config.max_wait_sec))
        if deadline is not None:
            wait = max(0.0, min(wait, deadline - time.monotonic()))
        keystrokes = keystrokes.replace("\x00", "")
        if not keystrokes:
            send = ":"
        elif is_tmux_key(keystrokes):
            send = f"tmux send-keys -t {self.target} {shlex.quote(keystrokes)}"
        elif len(keystrokes.encode()) > self.config.paste_threshold_bytes:
            send = self._paste_command(keystrokes)
        else:
            send = f"tmux send-keys -t {self.target} -l -- {shlex.quote(keystrokes)}"
        polls = math.ceil(wait / self.config.poll_sec) if wait > 0 else 0
        # Early return: one prompt was drawn per line the keystrokes submit (so "a\nb\n" waits for b too),
        # and bash is the foreground program on two polls in a row. Lines that draw no prompt (a
        # heredoc, a `for` body) only make the wait run its full duration, as Terminus-2 always does.
        prompts = 1 if is_tmux_key(keystrokes) else max(1, keystrokes.count("\n"))
        script = (
            f"{send} || exit 3; s0={self._seq}; idle=0; i=0; "
            f"while [ $i -lt {polls} ]; do sleep {self.config.poll_sec}; i=$((i+1)); "
            f"read s r < {self.state_dir}/rc 2>/dev/null; "
            f'if [ -n "$s" ] && [ "$s" -ge $((s0 + {prompts})) ] 2>/dev/null && '
            f"[ \"$(tmux display -p -t {self.target} '#{{pane_current_command}}')\" = bash ]; then "
            f"idle=$((idle+1)); [ $idle -ge 2 ] && break; else idle=0; fi; done; "
            f"cat {self.state_dir}/rc 2>/dev/null; echo"
        )
        start = time.monotonic()
        result = self.trial.exec(script, timeout=wait + 15)
        waited = time.monotonic() - start
        if result.rc == 3:
            raise TerminalError(f"tmux send-keys failed: {result.output[-1000:]}")
        seq = _parse_seq(result.output.strip().splitlines()[-1:])
        if seq:
            self._seq, self._last_rc = seq
        return waited

    def run(self, commands: Sequence[Command], deadline: float | None = None) -> TurnOutput:
        """One turn: send each command with its wait, then capture what it printed."""
        for command in commands:
            if deadline is not None and time.monotonic() >= deadline:
                break
            self.send(command.keystrokes, command.duration, deadline)
        return self.capture()

    def _paste_command(self, text: str) -> str:
        fd, path = tempfile.mkstemp(prefix="termagent-paste-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            remote = self.trial.copy_in(path, self.state_dir, name="paste")
        finally:
            os.unlink(path)
        return (f"tmux load-buffer -b termagent {shlex.quote(remote)} && "
                f"tmux paste-buffer -d -b termagent -t {self.target} && rm -f {shlex.quote(remote)}")

    # ---- output --------------------------------------------------------------------------------------

    def capture(self) -> TurnOutput:
        """What the terminal printed since the last capture (or the screen), and the last exit status."""
        if self.config.capture == "harbor":
            return self._capture_harbor()
        mark = self._mark_row if self._mark_row is not None else 0
        script = (
            f"info=$(tmux display -p -t {self.target} "
            f"'#{{history_size}} #{{cursor_y}} #{{alternate_on}}') || exit 3; echo \"$info\"; "
            f"cat {self.state_dir}/rc 2>/dev/null; echo; echo {_SEPARATOR}; "
            f"tmux capture-pane -p -t {self.target}; echo {_SEPARATOR}; "
            f"set -- $info; tmux capture-pane -p -t {self.target} -S $(({mark} - $1)) -E $2"
        )
        # Read-only, so safe to repeat (_exec_capture): a retry reads the same pane.
        result, parsed = self._exec_capture(script, lambda r: _parse_capture(r.output) if r.rc != 3 else None)
        (history, cursor_y, alternate), head_lines, screen, since_mark = parsed
        seq = _parse_seq(head_lines[1:2])
        if seq:
            self._seq, self._last_rc = seq
        rc = self._last_rc if self._seq != self._captured_seq else None
        self._captured_seq = self._seq

        screen_lines = screen.split("\n")[: self.config.height]
        since_lines = since_mark.rstrip("\n").split("\n")
        incremental = (
            self._mark_row is not None and not alternate and since_lines[0].startswith(self._mark_text)
        )  # a huge output is still incremental: the exec kept its head and tail, which we show too
        text = _strip_blank_tail("\n".join(since_lines) if incremental else "\n".join(screen_lines))
        self._mark_row = history + cursor_y
        self._mark_text = screen_lines[cursor_y].rstrip() if cursor_y < len(screen_lines) else ""
        limited = limit_output(text, self.config.max_output_bytes)
        return TurnOutput(text=limited, incremental=incremental, rc=rc,
                          truncated=limited != text or result.truncated)

    def _exec_capture(self, script: str, parse):
        """(exec result, parse(result)) of a read-only capture script, retried while `parse` returns None: under
        load `docker exec` has returned an empty output with exit 0 (twice in 258 oracle episodes at 6 containers
        on 2 cores, once in ~400 GRPO screen probes) and, once, an output without its head."""
        for attempt in range(CAPTURE_ATTEMPTS):
            result = self.trial.exec(script, timeout=30)
            parsed = parse(result)
            if parsed is not None:
                return result, parsed
            if attempt + 1 < CAPTURE_ATTEMPTS:
                log.warning("tmux capture came back empty, cut or failed (exit %s): retrying", result.rc)
                time.sleep(0.2 * (attempt + 1))
        raise TerminalError(f"tmux capture failed {CAPTURE_ATTEMPTS} times (last exit {result.rc}): "
                            f"{result.output[-1000:]}")

    def screen(self) -> str:
        """The visible screen now (does not move the new-output mark)."""
        result = self.trial.exec(f"tmux capture-pane -p -t {self.target}", timeout=30)
        return result.output if self.config.capture == "harbor" else _strip_blank_tail(result.output)

    def _capture_harbor(self) -> TurnOutput:
        """Harbor's TmuxSession.get_incremental_output (terminus-2), with the texts left to the protocol:
        the first capture is the visible screen; later ones are the scrollback (`capture-pane -p -S -`)
        from the last line of the previous scrollback's stripped text on, when that text is still found in
        it and something non-blank follows (incremental=True), else the visible screen. Both panes are
        read by one exec, raw (trailing blank rows kept, as Harbor sends them); nothing is limited here."""
        script = (f"cat {self.state_dir}/rc 2>/dev/null; echo; echo {_SEPARATOR}; "
                  f"tmux capture-pane -p -t {self.target} || exit 3; echo {_SEPARATOR}; "
                  f"tmux capture-pane -p -S - -t {self.target} || exit 3")
        marker = f"\n{_SEPARATOR}\n"

        def split(r):
            parts = r.output.split(marker) if r.rc == 0 else []
            return parts if len(parts) == 3 else None

        result, (head, screen, buffer) = self._exec_capture(script, split)
        screen += "\n"  # capture-pane ends every row with a newline; the marker took the last one
        seq = _parse_seq(head.strip().splitlines()[:1])
        if seq:
            self._seq, self._last_rc = seq
        rc = self._last_rc if self._seq != self._captured_seq else None
        self._captured_seq = self._seq
        previous, self._previous_buffer = self._previous_buffer, buffer
        new = None
        if previous is not None and not result.truncated:  # a cut exec output is not the scrollback
            pb = previous.strip()
            if pb in buffer:
                idx = buffer.index(pb)
                if "\n" in pb:
                    idx = pb.rfind("\n")  # as Harbor: an index into pb, used on the new buffer
                new = buffer[idx:]
        if new is not None and new.strip():
            return TurnOutput(text=new, incremental=True, rc=rc, truncated=False)
        return TurnOutput(text=screen, incremental=False, rc=rc, truncated=False)


def _parse_capture(output: str) -> tuple[tuple[int, int, int], list[str], str, str] | None:
    """The capture script's output split into (history, cursor_y, alternate), the header lines, the screen and
    the text since the mark; None when it is not whole (no separators, or the pane info line is missing)."""
    parts = output.split(f"{_SEPARATOR}\n", 2)
    if len(parts) != 3:
        return None
    header, screen, since_mark = parts
    head_lines = header.splitlines()
    match = re.fullmatch(r"(\d+) (\d+) (\d+)", head_lines[0].strip()) if head_lines else None
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))), head_lines, screen, since_mark


def _parse_seq(lines: Sequence[str]) -> tuple[int, int] | None:
    match = re.fullmatch(r"\s*(\d+) (\d+)\s*", lines[0]) if lines else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _strip_blank_tail(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)
