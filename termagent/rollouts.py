"""rollouts.jsonl / steps.jsonl: the schema check, an append-only writer that survives a crash, and a
streaming reader that tolerates what a crash leaves behind.

One line of rollouts.jsonl is one completion; one line of steps.jsonl is one training step's statistics
(the fields of both: docs/design.md#rollouts). The writer appends whole lines and fsyncs each batch, so a crash loses
at most the batch in flight and leaves at worst one truncated last line; the reader counts such a
line (and any other malformed one) with its line number instead of failing, so a 17k-line file with
one bad line still yields 17k-1 records.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from termagent import atomic

# Fields a reader needs to use a rollout at all; the rest default (see `normalize_rollout`).
REQUIRED_ROLLOUT_FIELDS: tuple[str, ...] = ("task_id", "training_step", "completion")
_NUMERIC_DEFAULTS = {
    "format_reward": 0.0,
    "script_reward": 0.0,
    "verifier_reward": 0.0,
    "reward": 0.0,
    "step_reward_std": 0.0,
    "step_frac_zero_std": 0.0,
}


class RolloutFieldError(ValueError):
    pass


def normalize_rollout(record: Any) -> dict:
    """Check one decoded line against the schema; fill optional fields. Raises RolloutFieldError
    naming the field, so the reader can report `line N: field X ...`."""
    if not isinstance(record, dict):
        raise RolloutFieldError(f"expected a JSON object, got {type(record).__name__}")
    for name in REQUIRED_ROLLOUT_FIELDS:
        if name not in record:
            raise RolloutFieldError(f"missing field {name!r}")
    if not isinstance(record["task_id"], str) or not record["task_id"]:
        raise RolloutFieldError(f"field 'task_id' must be a non-empty string, got {record['task_id']!r}")
    step = record["training_step"]
    if not isinstance(step, int) or isinstance(step, bool):
        raise RolloutFieldError(f"field 'training_step' must be an integer, got {step!r}")
    if not isinstance(record["completion"], str):
        raise RolloutFieldError("field 'completion' must be a string")
    for name, default in _NUMERIC_DEFAULTS.items():
        value = record.get(name, default)
        if value is None:
            value = default
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RolloutFieldError(f"field {name!r} must be a number, got {value!r}")
        record[name] = float(value)
    prompt = record.get("prompt", [])
    if not isinstance(prompt, list):
        raise RolloutFieldError("field 'prompt' must be a list of messages")
    record["prompt"] = prompt
    record.setdefault("exec_rc", None)
    record.setdefault("durations", {})
    turn_info = record.get("turn_info")
    if turn_info is not None and not isinstance(turn_info, list):
        raise RolloutFieldError("field 'turn_info' must be a list")
    return record


def n_turns(rollout: dict) -> int:
    """Turns of a rollout: len(turn_info) for multi-turn rows, 1 for single-turn GRPO rows."""
    turn_info = rollout.get("turn_info")
    return len(turn_info) if turn_info else 1


# ---------------------------------------------------------------------------------------- reading


@dataclass
class ReadStats:
    """What a streaming read saw; `malformed` holds (line number, reason), 1-based."""

    path: str
    n_lines: int = 0
    n_records: int = 0
    malformed: list[tuple[int, str]] = field(default_factory=list)
    truncated_last_line: bool = False
    max_reported: int = 100  # keep memory flat on a file of garbage: count all, list the first 100
    n_malformed: int = 0

    def add_malformed(self, line_no: int, reason: str) -> None:
        self.n_malformed += 1
        if len(self.malformed) < self.max_reported:
            self.malformed.append((line_no, reason))

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "n_lines": self.n_lines,
            "n_records": self.n_records,
            "n_malformed": self.n_malformed,
            "malformed": [{"line": n, "reason": r} for n, r in self.malformed],
            "truncated_last_line": self.truncated_last_line,
        }


def iter_jsonl(path: str | Path, stats: ReadStats | None = None, validate=None) -> Iterator[dict]:
    """Yield one decoded object per good line of `path`, streaming. Blank lines are skipped;
    undecodable lines and lines `validate` rejects (it raises ValueError) are counted in `stats`.
    A last line without its newline that does not decode is a crash's truncated write."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats(str(path))
    with open(path, "rb") as fh:
        line_no = 0
        for raw in fh:
            line_no += 1
            stats.n_lines += 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if not raw.endswith(b"\n"):
                    stats.truncated_last_line = True
                    stats.add_malformed(line_no, f"truncated last line ({exc.msg})")
                else:
                    stats.add_malformed(line_no, f"invalid JSON: {exc.msg} at column {exc.colno}")
                continue
            if validate is not None:
                try:
                    obj = validate(obj)
                except ValueError as exc:
                    stats.add_malformed(line_no, str(exc))
                    continue
            stats.n_records += 1
            yield obj


def iter_rollouts(path: str | Path, stats: ReadStats | None = None) -> Iterator[dict]:
    """Stream the valid rollouts of a rollouts.jsonl (normalized, see `normalize_rollout`)."""
    return iter_jsonl(path, stats, validate=normalize_rollout)


# ---------------------------------------------------------------------------------------- writing


class JsonlAppender:
    """Append-only JSONL log: `write_batch` appends whole lines, then flush + fsync. If the previous
    writer crashed mid-line, the file is first terminated with a newline so the torn line stays a
    single malformed line and the next record starts clean."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")  # noqa: SIM115 (held open for the writer's life)
        if self._fh.tell() > 0:
            with open(self.path, "rb") as probe:
                probe.seek(-1, os.SEEK_END)
                if probe.read(1) != b"\n":
                    self._fh.write(b"\n")

    def write_batch(self, records: Iterable[dict]) -> int:
        data = b"".join(_encode_line(r) for r in records)
        if data:
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        return data.count(b"\n")

    def write(self, record: dict) -> None:
        self.write_batch([record])

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _encode_line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class AtomicJsonlWriter:
    """A derived dataset file: streamed into a temporary file next to it (unique, so two writers never
    collide), renamed into place on a clean close, removed on error: a reader never sees half a dataset."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        self._tmp = Path(tmp)
        self._fh = os.fdopen(fd, "wb")  # held until commit/abort
        self.count = 0

    def write(self, record: dict) -> None:
        self._fh.write(_encode_line(record))
        self.count += 1

    def commit(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.chmod(self._tmp, atomic.FILE_MODE)
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


# ---- solve rates (the sample stage's rates.json, termagent/train/sampling.py) ----------------------------------

def read_rates(path: Path) -> dict[str, dict]:
    """The `tasks` map of a rates.json, with a clear error naming the file."""
    try:
        doc = json.loads(Path(path).read_text())
        tasks = doc["tasks"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a solve-rate file of the sample stage ({e})") from None
    for task_id, r in tasks.items():
        if not isinstance(r, dict) or not {"n", "passes"} <= set(r):
            raise ValueError(f"{path}: tasks[{task_id!r}] needs n and passes")
    return tasks


def tasks_with_signal(path: Path, *, min_rate: float = 0.0, max_rate: float = 1.0) -> list[str]:
    """Task ids whose measured rate lies strictly inside (min_rate, max_rate): the RL stages' curriculum."""
    return sorted(t for t, r in read_rates(path).items()
                  if r["n"] >= 2 and min_rate < r["passes"] / r["n"] < max_rate)
