"""`termagent tasks check`: oracle and nop per task, a table, JSON, and the exit status."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from termagent.cli import main
from termagent.sandbox.check import check

from .conftest import FIXTURES, REPO_PARAMS

pytestmark = pytest.mark.docker


def test_check_passes_good_tasks_and_fails_a_task_whose_tests_nop_passes(tmp_path, base_image):
    suite = tmp_path / "suite"
    shutil.copytree(FIXTURES / "upper-case", suite / "upper-case")
    shutil.copytree(FIXTURES / "upper-case", suite / "lenient")
    (suite / "lenient" / "tests" / "test_outputs.py").write_text("def test_nothing():\n    pass\n")
    out = tmp_path / "check.json"
    result = CliRunner().invoke(check, [str(suite), "--json", str(out), "-j", "2", "--params", str(REPO_PARAMS)])
    assert result.exit_code == 1, result.output
    entries = {e["task_id"]: e for e in json.loads(out.read_text())}
    assert entries["upper-case"]["ok"] and entries["upper-case"]["layout"] == "harbor"
    assert entries["upper-case"]["oracle"] == {"reward": 1.0, "rewards": {"reward": 1.0}, "error": None,
                                               "passed": 2, "total": 2}
    assert entries["upper-case"]["nop"]["reward"] == 0.0
    assert not entries["lenient"]["ok"] and entries["lenient"]["nop"]["reward"] == 1.0
    assert "1/2 ok" in result.output

    result = CliRunner().invoke(check, [str(suite / "upper-case"), "--params", str(REPO_PARAMS)])
    assert result.exit_code == 0, result.output


def test_check_names_the_problem_of_a_malformed_task(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    # through the `termagent` command: `check` lives in termagent.sandbox and the root CLI adds it to `tasks`
    result = CliRunner().invoke(main, ["tasks", "check", str(bad)])
    assert result.exit_code != 0
    # one line per problem, each naming the file and the field
    assert 'bad/task.toml: [agent].timeout_sec must be a positive number, got "soon"' in result.output
    assert "bad/instruction.md: missing" in result.output and "bad/tests/test.sh: missing" in result.output


def test_check_classes_a_passing_nop_after_rerunning_it(tmp_path, base_image):
    """Issue 29, class 5: a passing nop is neither ok nor a plain failure: NopPassesVacuous in the JSON,
    the table and the summary line, after the reruns."""
    from .test_offline import OFFLINE

    out = tmp_path / "check.json"
    result = CliRunner().invoke(check, [str(OFFLINE / "nop-passes-timing"), str(FIXTURES / "upper-case"),
                                        "--json", str(out), "--nop-reruns", "1", "--params", str(REPO_PARAMS)])
    assert result.exit_code == 1, result.output
    entries = {e["task_id"]: e for e in json.loads(out.read_text())}
    timing = entries["nop-passes-timing"]
    assert timing["class"] == "NopPassesVacuous" and not timing["ok"]
    (failure,) = timing["failures"]
    assert failure["agent"] == "nop" and len(failure["reruns"]) == 1 and failure["tail"]
    assert entries["upper-case"]["class"] == "ok" and entries["upper-case"]["failures"] == []
    assert "1/2 ok; not ok: NopPassesVacuous 1" in result.output
