"""Progress a person can follow: TrialProgress's plain lines on a non-terminal stream (a log file), the heartbeat
while nothing finishes, rich's bar on a terminal, and run_trials reporting real trials through it."""

from __future__ import annotations

import io

import pytest

from termagent.sandbox.progress import TrialProgress, duration


class Clock:
    """A clock the test moves by hand: no timed assertions."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_duration_reads_like_a_person_writes_it():
    assert [duration(s) for s in (0, 42, 125, 3725)] == ["0s", "42s", "2m05s", "1h02m"]


def test_a_log_gets_a_line_every_n_trials_with_done_passes_elapsed_and_eta():
    stream, clock = io.StringIO(), Clock()
    with TrialProgress("demos", 20, stream=stream, clock=clock, heartbeat=False) as progress:
        for i in range(20):
            clock.now += 6.0  # each trial 6 s
            progress.advance(passed=i % 2 == 0, error=i == 3)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "demos: 20 to run"
    # every 2 trials (a tenth of 20): 10 lines, the last at 20/20
    assert lines[1] == "demos: 2/20 done, 1 passed, 12s elapsed, ETA 1m48s"
    assert lines[2] == "demos: 4/20 done, 2 passed, 1 error, 24s elapsed, ETA 1m36s"
    assert lines[-1] == "demos: 20/20 done, 10 passed, 1 error, 2m00s elapsed, ETA 0s"
    assert len(lines) == 11


def test_a_slow_trial_still_gets_a_line_every_interval():
    stream, clock = io.StringIO(), Clock()
    with TrialProgress("eval base", 100, stream=stream, clock=clock, interval_s=30, heartbeat=False) as progress:
        clock.now += 29
        progress.tick()  # under 30 s since the last line: nothing
        assert stream.getvalue().splitlines() == ["eval base: 100 to run"]
        clock.now += 2
        progress.tick()  # the heartbeat: nothing finished yet, no ETA
        clock.now += 40
        progress.advance(passed=True)  # not the 10th trial, but 40 s since the last line
        progress.advance()  # a second later in trial count, 0 s later: no line
    assert stream.getvalue().splitlines()[1:3] == ["eval base: 0/100 done, 0 passed, 31s elapsed, ETA ?",
                                                   "eval base: 1/100 done, 1 passed, 1m11s elapsed, ETA 1h57m"]
    # left before the end (an exception): the last line says where it stopped
    assert stream.getvalue().splitlines()[-1] == "eval base: 2/100 done, 1 passed, 1m11s elapsed, ETA 57m59s (stopped)"


def test_a_loop_without_outcomes_shows_no_passes_and_a_disabled_one_prints_nothing():
    stream, clock = io.StringIO(), Clock()
    with TrialProgress("terminal screens", 1, stream=stream, clock=clock, outcomes=False) as progress:
        clock.now += 3
        progress.advance()
    assert stream.getvalue().splitlines()[-1] == "terminal screens: 1/1 done, 3s elapsed, ETA 0s"
    quiet = io.StringIO()
    with TrialProgress("bench", 3, stream=quiet, enabled=False) as progress:
        progress.advance(passed=True)
    assert quiet.getvalue() == "" and (progress.done, progress.passed) == (1, 1)


def test_a_terminal_gets_rich_bar_with_passes():
    stream = Terminal()
    with TrialProgress("demos", 4, stream=stream) as progress:
        for _ in range(4):
            progress.advance(passed=True)
    out = stream.getvalue()
    assert "demos" in out and "4/4" in out and "4 passed, 0 errors" in out and "ETA" in out
    assert "to run" not in out  # not the plain lines


@pytest.mark.docker
def test_run_trials_reports_real_trials_in_a_log(sandbox, capsys):
    from termagent.sandbox import run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent
    from termagent.tasks.load import load_task

    from .conftest import FIXTURES

    task = load_task(FIXTURES / "upper-case")
    results = run_trials(sandbox, [(task, OracleAgent(), 0), (task, NopAgent(), 0)], concurrency=1,
                         description="check")
    assert [r.reward for r in results] == [1.0, 0.0]
    lines = capsys.readouterr().err.splitlines()  # pytest's captured stderr is not a terminal: plain lines
    assert lines[0] == "check: 2 to run"
    assert lines[1].startswith("check: 1/2 done, ") and "ETA" in lines[1]
    assert lines[-1].startswith("check: 2/2 done, 1 passed, ") and lines[-1].endswith("ETA 0s")
