"""Reward parsing (pure) and the verifier in a real container: reward.json, reward.txt, pytest mode,
a missing reward, a verifier timeout, and tests that stay invisible until the agent phase is over."""

from __future__ import annotations

import dataclasses

import pytest

from termagent.sandbox import run_trial
from termagent.sandbox.errors import VerifierError, VerifierTimeoutError
from termagent.sandbox.verifier import inline_reward_files, parse_reward_files, pytest_counts

PASS_TWO_FAIL_ONE = """\
def test_a():
    assert True


def test_b():
    assert True


def test_c():
    assert False
"""


# ---- parsing (no engine) -------------------------------------------------------------------------------

def test_reward_json_wins_over_reward_txt_and_keeps_every_key():
    files = {"reward.json": b'{"reward": 0.5, "style": 1}', "reward.txt": b"1"}
    assert parse_reward_files(files) == {"reward": 0.5, "style": 1.0}


def test_reward_json_with_a_single_other_key_makes_it_the_reward():
    assert parse_reward_files({"reward.json": b'{"accuracy": 0.25}'}) == {"accuracy": 0.25, "reward": 0.25}


def test_reward_txt_holds_one_number():
    assert parse_reward_files({"reward.txt": b" 0.75\n"}) == {"reward": 0.75}


@pytest.mark.parametrize("files, message", [
    ({}, "wrote no reward"),
    ({"reward.txt": b"passed"}, "must hold one number"),
    ({"reward.json": b"[1]"}, "non-empty object"),
    ({"reward.json": b'{"reward": "1"}'}, "finite number"),
    ({"reward.json": b'{"a": 1, "b": 0}'}, "no 'reward' key"),
    ({"reward.json": b"{nope"}, "not valid JSON"),
])
def test_bad_or_missing_reward_is_a_verifier_error(files, message):
    with pytest.raises(VerifierError, match=message):
        parse_reward_files(files)


@pytest.mark.parametrize("output, counts", [
    ("..F\n=== 2 passed, 1 failed in 0.12s ===\n", (2, 3)),
    ("===== 1 failed, 3 passed, 2 errors, 1 skipped in 1.5s =====", (3, 6)),
    ("4 passed in 0.01s\n", (4, 4)),
    ("== 5 passed, 1 warning in 0.30s ==", (5, 5)),
    ("=== 1 passed in 0.1s ===\nlater\n=== 2 failed, 1 passed in 0.2s ===", (1, 3)),
    ("no tests ran\n", None),
])
def test_pytest_counts_from_the_summary_line(output, counts):
    assert pytest_counts(output) == counts


# ---- in a container -----------------------------------------------------------------------------------

class RecordingAgent:
    """Looks for the tests and the verifier's logs during the agent phase."""

    name = "recorder"

    def run(self, trial, task):
        seen = trial.exec("ls /tests /logs/verifier 2>&1", timeout=10)
        return {"rc": seen.rc, "output": seen.output}


class CheatingAgent:
    """Plants a conftest.py that passes every test and a reward of 1: the verifier must wipe both."""

    name = "cheater"

    def run(self, trial, task):
        trial.exec("mkdir -p /tests /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
                   "printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):\\n"
                   "    pass\\n' > /tests/conftest.py", timeout=10)


@pytest.mark.docker
def test_tests_are_invisible_during_the_agent_phase(sandbox, make_task):
    task = make_task("invisible", tests={"test_outputs.py": "def test_ok():\n    pass\n"})
    result = run_trial(sandbox, task, RecordingAgent())
    assert result.agent_result["rc"] != 0
    assert "No such file or directory" in result.agent_result["output"]
    assert result.error is None and result.reward == 1.0  # and the tests did run afterwards


@pytest.mark.docker
def test_pytest_partial_credit_and_agent_planted_files_are_wiped(sandbox, make_task):
    task = make_task("partial", tests={"test_outputs.py": PASS_TWO_FAIL_ONE})
    result = run_trial(sandbox, task, CheatingAgent())
    assert result.error is None
    assert result.reward == 0.0 and (result.passed, result.total) == (2, 3)
    assert "1 failed, 2 passed" in result.verifier_output


@pytest.mark.docker
def test_reward_json_is_read_with_all_its_keys(sandbox, make_task):
    test_sh = "#!/bin/bash\necho '{\"reward\": 0.25, \"lint\": 1}' > /logs/verifier/reward.json\n"
    result = run_trial(sandbox, make_task("json", test_sh=test_sh), RecordingAgent())
    assert result.error is None and result.reward == 0.25 and result.rewards == {"reward": 0.25, "lint": 1.0}


@pytest.mark.docker
def test_missing_reward_is_a_verifier_error_not_a_zero(sandbox, make_task):
    task = make_task("no-reward", test_sh="#!/bin/bash\necho 'tests ran, forgot the reward'\n")
    with sandbox.trial(task) as trial, pytest.raises(VerifierError, match="wrote no reward") as info:
        trial.verify()
    assert "forgot the reward" in str(info.value)
    result = run_trial(sandbox, task, RecordingAgent())
    assert result.reward is None and result.error["class"] == "VerifierError"


@pytest.mark.docker
def test_verifier_timeout(sandbox, make_task):
    task = make_task("slow-tests", test_sh="#!/bin/bash\nsleep 60\necho 1 > /logs/verifier/reward.txt\n",
                     verifier_timeout=1)
    with sandbox.trial(task) as trial, pytest.raises(VerifierTimeoutError):
        trial.verify()


@pytest.mark.docker
def test_pytest_reward_mode_resolves_only_when_every_test_passed(sandbox, make_task):
    # Terminal-Bench 1 grading: no reward file, the pytest summary decides.
    test_sh = "#!/bin/bash\npython3 -m pytest -rA -p no:cacheprovider /tests/test_outputs.py\n"
    failing = dataclasses.replace(make_task("tb1-fail", test_sh=test_sh, tests={"test_outputs.py": PASS_TWO_FAIL_ONE}),
                                  reward_mode="pytest")
    passing = dataclasses.replace(make_task("tb1-pass", test_sh=test_sh,
                                            tests={"test_outputs.py": "def test_a():\n    pass\n"}),
                                  reward_mode="pytest")
    failed, passed = run_trial(sandbox, failing, RecordingAgent()), run_trial(sandbox, passing, RecordingAgent())
    assert failed.error is None and failed.reward == 0.0 and (failed.passed, failed.total) == (2, 3)
    assert passed.error is None and passed.reward == 1.0 and (passed.passed, passed.total) == (1, 1)


@pytest.mark.docker
def test_a_reward_file_too_large_to_inline_is_read_through_the_engine(sandbox, make_task):
    big = "{\"reward\": 0.5, " + ", ".join(f"\"k{i}\": 1" for i in range(2000)) + "}"  # > 16 KiB
    test_sh = f"#!/bin/bash\necho 'tests ran'\necho '{big}' > /logs/verifier/reward.json\n"
    result = run_trial(sandbox, make_task("big-reward", test_sh=test_sh), RecordingAgent())
    assert result.error is None and result.reward == 0.5 and len(result.rewards) == 2001
    assert result.verifier_output == "tests ran\n"  # our timing and reward frames are not part of it


@pytest.mark.docker
def test_the_verifier_output_keeps_stderr_and_stdout_in_the_order_they_were_written(sandbox, make_task):
    # The engine forwards a command's stdout and stderr as two streams, each on its own; read apart, an error
    # line written just before the test script exits can arrive after the verifier's own trailer and be cut
    # off with it (the "runner never started" check then lost its "command not found" line).
    lines = [f"{'err' if i % 2 else 'out'} {i}" for i in range(200)]
    body = "".join(f"echo '{line}'{' >&2' if line.startswith('err') else ''}\n" for line in lines)
    test_sh = f"#!/bin/bash\n{body}echo 1 > /logs/verifier/reward.txt\necho 'last words' >&2\n"
    result = run_trial(sandbox, make_task("interleaved", test_sh=test_sh), RecordingAgent())
    assert result.error is None and result.reward == 1.0
    assert result.verifier_output == "\n".join([*lines, "last words"]) + "\n"


def test_inline_reward_block_is_used_only_when_whole():
    nonce = "__termagent_reward_0123456789abcdef"
    block = f"tests ran\n{nonce}\nreward.txt:MQo=\nreward.json:eyJyZXdhcmQiOiAxfQ==\n{nonce}\n"
    assert inline_reward_files(block, nonce) == {"reward.txt": b"1\n", "reward.json": b'{"reward": 1}'}
    assert inline_reward_files(f"{nonce}\n{nonce}\n", nonce) == {}  # the tests wrote no reward
    assert inline_reward_files(f"x\n{nonce}\nreward.txt:MQo=\n", nonce) is None  # cut before its end
    assert inline_reward_files(f"{nonce}\nreward.json:!\n{nonce}\n", nonce) is None  # too large to inline
    cut = f"{nonce}\nreward.txt:MQo=\n[... output limited to 64 bytes; 99 bytes in the middle omitted ...]\n{nonce}\n"
    assert inline_reward_files(cut, nonce) is None
