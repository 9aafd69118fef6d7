"""The verifier: after the agent phase, copy the tests in, run them, read the reward.

Harbor: the tests write /logs/verifier/reward.json (a dict of numbers, "reward" the main one) or
reward.txt (one number). Terminal-Bench 1 ("pytest" mode): resolved iff every pytest test passed.
Either way the pytest counts of the output are recorded, for partial credit (GRPO).
A verifier that leaves no reward is a VerifierError, never a silent 0.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import secrets
import shlex
import tarfile
from dataclasses import dataclass

import docker

from termagent.sandbox.errors import OutOfMemoryError, VerifierError, VerifierTimeoutError
from termagent.tasks.pytest_verdict import pytest_verdict

LOGS_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
REWARD_INLINE_MAX = 16384  # bytes; a larger reward file is read through the engine

# "==== 3 passed, 1 failed, 2 errors in 0.12s ====" (pytest's final line; also -q's unframed form)
_TIME_MARK = "__termagent_tests_ns="
_CTRF_MARK = "__termagent_ctrf_present__"
_FINAL_LINE = re.compile(r"^=*\s*((?:\d+ \w+,?\s*)+)in [\d.]+s", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


@dataclass
class VerifierResult:
    reward: float
    rewards: dict[str, float]
    passed: int | None  # pytest tests passed / run, when the output holds a pytest summary
    total: int | None
    output: str
    rc: int | None
    duration_s: float
    truncated: bool = False
    tests_s: float | None = None  # the test command's own run time, timed inside the container


def pytest_counts(output: str) -> tuple[int, int] | None:
    """(passed, total) from the last pytest summary line of `output`; None when there is none.
    total counts passed, failed, errors and xpassed (skipped and deselected tests did not run)."""
    matches = list(_FINAL_LINE.finditer(output))
    if not matches:
        return None
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in _COUNT.findall(matches[-1].group(1))}
    passed = counts.get("passed", 0) + counts.get("xfailed", 0)
    total = passed + counts.get("failed", 0) + counts.get("error", 0) + counts.get("xpassed", 0)
    return passed, total


def parse_reward_files(files: dict[str, bytes]) -> dict[str, float]:
    """Rewards from the verifier's log dir contents ({"reward.json": bytes, ...}); reward.json wins."""
    if "reward.json" in files:
        try:
            data = json.loads(files["reward.json"])
        except ValueError as e:
            raise VerifierError(f"{LOGS_DIR}/reward.json is not valid JSON: {e}") from None
        if not isinstance(data, dict) or not data:
            raise VerifierError(f"{LOGS_DIR}/reward.json must be a non-empty object of numbers, got {data!r:.200}")
        rewards = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise VerifierError(f"{LOGS_DIR}/reward.json: {key!r} must be a finite number, got {value!r:.100}")
            rewards[key] = float(value)
        if "reward" not in rewards:
            if len(rewards) != 1:
                raise VerifierError(f"{LOGS_DIR}/reward.json has no 'reward' key and several others: "
                                    f"{sorted(rewards)}")
            rewards["reward"] = next(iter(rewards.values()))
        return rewards
    if "reward.txt" in files:
        text = files["reward.txt"].decode(errors="replace").strip()
        try:
            value = float(text)
        except ValueError:
            raise VerifierError(f"{LOGS_DIR}/reward.txt must hold one number, got {text[:100]!r}") from None
        if not math.isfinite(value):
            raise VerifierError(f"{LOGS_DIR}/reward.txt must hold a finite number, got {text[:100]!r}")
        return {"reward": value}
    raise VerifierError(f"the verifier wrote no reward ({LOGS_DIR}/reward.json or reward.txt)")


def run_verifier(trial) -> VerifierResult:
    """Copy the task's tests to /tests, run its test command under the verifier timeout, parse."""
    task = trial.task
    # Tests go to a fresh, unguessable directory first, then replace /tests in the same exec that runs
    # them: anything the agent left in /tests (a conftest.py) or /logs/verifier (a reward) is gone.
    staging = f"/.termagent-tests-{secrets.token_hex(8)}"
    tests_dir = task.tests_dir
    items = ([(entry, f"{staging}/{entry.name}") for entry in sorted(tests_dir.iterdir())]
             if tests_dir is not None and tests_dir.is_dir() else [])
    items += [(path, f"{staging}/{name}")  # e.g. TB1's run-tests.sh, kept at the task root
              for name, path in sorted(getattr(task, "extra_test_files", {}).items())]
    # The reward files come back base64-encoded at the end of the same exec's output, framed by a nonce
    # (no extra archive round trip); when that block is missing or incomplete they are read via the engine.
    nonce = f"__termagent_reward_{secrets.token_hex(8)}"
    report = (f"[ -s {LOGS_DIR}/ctrf.json ] && echo {_CTRF_MARK}; "
              f"echo {nonce}; for f in reward.json reward.txt; do p={LOGS_DIR}/$f; [ -f $p ] || continue; "
              f"if [ $(stat -c %s $p) -le {REWARD_INLINE_MAX} ] && b=$(base64 -w0 $p); "
              f"then echo \"$f:$b\"; else echo \"$f:!\"; fi; done; echo {nonce}")
    setup = f"mkdir -p {staging} && rm -rf {TESTS_DIR} {LOGS_DIR} && mv {staging} {TESTS_DIR} && mkdir -p {LOGS_DIR}"
    command = (f"{setup} || exit 97; "
               f"s=$(date +%s%N); bash -c {shlex.quote(task.test_command)}; rc=$?; e=$(date +%s%N); "
               f"echo; echo {_TIME_MARK}$((e - s)); {report}; exit $rc")
    # Interpreters the tests ask uv for that the image lacks: put in now (after the agent phase), on the
    # verifier's PATH only (termagent/sandbox/pythons.py).
    pythons = getattr(trial, "pythons", None)
    python_env, trial.verifier_pythons = pythons.provide(trial) if pythons is not None else ({}, None)
    run = trial.exec(command, timeout=task.verifier_timeout_sec, files=items or None,
                     env={"TEST_DIR": TESTS_DIR, **python_env, **getattr(task, "verifier_env", {})})
    if run.rc == 97:
        raise VerifierError(f"could not set up {TESTS_DIR} and {LOGS_DIR}: {run.output[-500:]}")
    inline_rewards = inline_reward_files(run.output, nonce)
    output, mark, tests_ns = run.output.rpartition(_TIME_MARK)
    ctrf_present = bool(mark) and _CTRF_MARK in tests_ns
    if mark:  # the test command's output ends where our time mark (and the reward block) begins
        run.output = output.rstrip("\n") + "\n"
    tests_ns = tests_ns.strip().split("\n", 1)[0] if mark else ""
    tests_s = int(tests_ns) / 1e9 if tests_ns.isdigit() else None
    if run.timed_out:
        raise VerifierTimeoutError(f"the tests ran past the verifier timeout ({task.verifier_timeout_sec:g} s)")
    if run.oom_killed:
        raise OutOfMemoryError("the tests were killed at the container's memory limit")
    counts = pytest_counts(run.output)
    passed, total = counts if counts else (None, None)

    if task.reward_mode == "pytest":
        verdict = pytest_verdict(run.output)
        if verdict["tests_total"] == 0 and counts is None:
            raise _with_output(VerifierError("reward_mode pytest: no pytest summary in the verifier's output "
                                             f"(rc {run.rc}); tail:\n{run.output[-1000:]}"), run.output)
        rewards = {"reward": verdict["reward"]}
        if verdict["tests_total"] > 0:
            passed, total = int(verdict["tests_passed"]), int(verdict["tests_total"])
        else:  # no -rA short summary: fall back to the final counts line
            rewards["reward"] = 1.0 if total and passed == total else 0.0
    else:
        try:
            rewards = parse_reward_files(inline_rewards if inline_rewards is not None else _read_logs(trial))
        except VerifierError as e:
            raise _with_output(VerifierError(f"{e} (test command rc {run.rc}); output tail:\n{run.output[-1000:]}"),
                               run.output) from None
        if rewards["reward"] == 0.0 and counts is None:
            cause = runner_never_started(task, run.output, ctrf_present)
            missing = (getattr(trial, "verifier_pythons", None) or {}).get("unavailable")
            if cause and missing:
                cause += "; Python asked for but not available offline: " + "; ".join(
                    f"{minor}: {why}" for minor, why in missing.items())
            if cause:
                raise _with_output(VerifierError(
                    f"the test runner never started ({cause}): the verifier's reward 0 is not a grade "
                    f"(test command rc {run.rc}); output tail:\n{run.output[-1500:]}"), run.output)
    return VerifierResult(reward=rewards["reward"], rewards=rewards, passed=passed, total=total,
                          output=run.output, rc=run.rc, duration_s=run.duration_s, truncated=run.truncated,
                          tests_s=tests_s)


_NOT_FOUND = re.compile(r"^.*(?:command not found|No such file or directory|No module named pytest|"
                        r"No interpreter found|error: Failed to (?:fetch|download)|Could not find a version).*$",
                        re.MULTILINE)


def runner_never_started(task, output: str, ctrf_present: bool) -> str | None:
    """Why a pytest-based verifier's runner evidently never ran (None: it ran, or the task runs none).
    A test script that invokes pytest (directly, through uvx / uv run) and left neither a pytest summary
    nor /logs/verifier/ctrf.json did not test anything: its `echo 0 > reward.txt` is no verdict."""
    if ctrf_present or re.search(r"\bno tests ran\b", output):
        return None
    scripts = []
    for path in [*(sorted(task.tests_dir.glob("*.sh")) if task.tests_dir and task.tests_dir.is_dir() else []),
                 *getattr(task, "extra_test_files", {}).values()]:
        try:
            scripts.append(path.read_text(errors="replace"))
        except OSError:
            pass
    if not any("pytest" in text for text in scripts):
        return None
    lines = [m.group(0).strip()[:200] for m in _NOT_FOUND.finditer(output)]
    detail = f"; e.g. {lines[-1]!r}" if lines else ""
    return f"no pytest summary and no {LOGS_DIR}/ctrf.json{detail}"


def _with_output(error: VerifierError, output: str) -> VerifierError:
    error.output = output  # the runner keeps it as the trial's verifier_output
    return error


def inline_reward_files(output: str, nonce: str) -> dict[str, bytes] | None:
    """The reward files from the framed block at the end of the verifier's output; None when the block
    is not there whole (killed, or cut by output truncation) or a file was too large to inline."""
    end = output.rfind(nonce)
    begin = output.rfind(nonce, 0, end) if end > 0 else -1
    if begin < 0:
        return None
    files = {}
    for line in output[begin + len(nonce): end].split():
        name, _, data = line.partition(":")
        if name not in ("reward.json", "reward.txt") or data == "!":
            return None
        try:
            files[name] = base64.b64decode(data, validate=True)
        except ValueError:
            return None
    return files


def _read_logs(trial) -> dict[str, bytes]:
    """reward.json / reward.txt from the container's verifier log dir, in one archive round trip."""
    try:
        stream, _ = trial.container.get_archive(LOGS_DIR)
    except docker.errors.NotFound:
        return {}
    files = {}
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        for member in tar:
            name = member.name.split("/", 1)[-1] if "/" in member.name else ""
            if member.isfile() and name in ("reward.json", "reward.txt") and member.size < (1 << 20):
                files[name] = tar.extractfile(member).read()
    return files
