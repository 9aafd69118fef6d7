"""Progress of a long loop of trials that a person can follow on a terminal and in a log file alike.

    with TrialProgress("demos", total=len(specs)) as progress:
        for result in ...:
            progress.advance(passed=result.reward is not None and result.reward >= 1.0, error=bool(result.error))

On a terminal (the stream's isatty()): rich's progress bar, with passes, elapsed time and rich's ETA.
Anywhere else (`dvc repro` into a log file, CI, nohup): one plain line every `every` trials (about a tenth of the
total) and, while nothing finishes, every `interval_s` seconds (a heartbeat thread), then a last line at the end:

    demos: 12/48 done, 9 passed, 1 error, 2m05s elapsed, ETA 6m15s

Why not rich or tqdm alone: rich's live display, written to a file, draws nothing until it stops (one line at
the end), and tqdm writes carriage-return redraws, not lines, so `tail -f` of a log shows nothing useful.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Self, TextIO

INTERVAL_S = 30.0  # a heartbeat at least this often while a trial runs (non-terminal streams)
LINES = 10  # about this many count-driven lines over a loop (every `total / LINES` trials)


def duration(seconds: float) -> str:
    """1h02m, 2m05s, 42s."""
    s = round(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class TrialProgress:
    """Counts finished trials, passes and errors of one loop and reports them on `stream` (default stderr).
    `enabled=False`: counts only (benchmarks, tests); `outcomes=False`: a loop with no pass or fail (passes and
    errors not shown). `clock` is injectable (tests); advance() and tick() are thread-safe."""

    def __init__(self, description: str, total: int, *, stream: TextIO | None = None, enabled: bool = True,
                 every: int | None = None, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True, outcomes: bool = True):
        self.description = description
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.every = every or max(1, math.ceil(total / LINES))
        self.interval_s = interval_s
        self.outcomes = outcomes
        self.clock = clock
        self.done = self.passed = self.errors = 0
        self.started = clock()
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat = heartbeat
        self._thread: threading.Thread | None = None
        self._bar = None
        self._job = None

    @property
    def is_terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self) -> Self:
        self.started = self._last_line = self.clock()
        if not self.enabled or self.total == 0:
            return self
        if self.is_terminal:
            from rich import progress as rp
            from rich.console import Console

            counts = [rp.TextColumn("{task.fields[passed]} passed, {task.fields[errors]} errors")] * self.outcomes
            self._bar = rp.Progress(rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(),
                                    *counts, rp.TimeElapsedColumn(), rp.TextColumn("ETA"), rp.TimeRemainingColumn(),
                                    console=Console(file=self.stream), transient=False)
            self._bar.start()
            self._job = self._bar.add_task(self.description, total=self.total, passed=0, errors=0)
        else:
            self._print(f"{self.description}: {self.total} to run")
            if self._heartbeat:
                self._thread = threading.Thread(target=self._beat, name=f"progress-{self.description}",
                                                daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self.total and self.done < self.total:  # stopped early (an exception): say where
            with self._lock:
                self._print(self.line() + " (stopped)")

    def advance(self, *, passed: bool = False, error: bool = False) -> None:
        """One more trial finished."""
        with self._lock:
            self.done += 1
            self.passed += bool(passed)
            self.errors += bool(error)
            if not self.enabled:
                return
            if self._bar is not None:
                self._bar.update(self._job, advance=1, passed=self.passed, errors=self.errors)
            elif (self.done % self.every == 0 or self.done == self.total
                  or self.clock() - self._last_line >= self.interval_s):
                self._print(self.line())

    def tick(self) -> None:
        """A heartbeat: print the state when no line came for `interval_s` (the thread calls this)."""
        with self._lock:
            if self.enabled and self._bar is None and self.clock() - self._last_line >= self.interval_s:
                self._print(self.line())

    def line(self) -> str:
        elapsed = self.clock() - self.started
        eta = duration(elapsed / self.done * (self.total - self.done)) if self.done else "?"
        counts = f", {self.passed} passed" if self.outcomes else ""
        if self.outcomes and self.errors:
            counts += f", {self.errors} error{'s' if self.errors != 1 else ''}"
        return f"{self.description}: {self.done}/{self.total} done{counts}, {duration(elapsed)} elapsed, ETA {eta}"

    def _print(self, text: str) -> None:
        self._last_line = self.clock()
        print(text, file=self.stream, flush=True)

    def _beat(self) -> None:
        while not self._stop.wait(min(self.interval_s, 5.0)):
            self.tick()
