"""TB1 tasks run as they are: oracle 1.0 and nop 0.0 on the TB1 fixture (solution.yaml replayed through
tmux in the container) and on its Harbor import (test.sh grading through pytest_verdict)."""

from pathlib import Path

import pytest

from termagent.tasks.load import load_task
from termagent.tasks.tb1_import import import_tb1_task

TB1 = Path(__file__).parent / "fixtures" / "tb1-sum-numbers"
HARBOR = Path(__file__).parent / "fixtures" / "harbor-count-errors"


@pytest.mark.docker
def test_oracle_and_nop_on_tb1_as_is_and_imported(tmp_path, base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig, run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent

    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)
    tb1 = load_task(TB1, cache_dir=tmp_path / "cache")
    imported = load_task(import_tb1_task(TB1, tmp_path / "imported"))
    harbor = load_task(HARBOR)
    specs = [(task, agent, 0) for task in (tb1, imported, harbor) for agent in (OracleAgent(), NopAgent())]
    results = {(r.task_id, r.agent, task.layout): r
               for r, (task, _, _) in zip(run_trials(sandbox, specs, progress=False), specs)}

    for (task_id, agent, layout), r in results.items():
        expected = 1.0 if agent == "oracle" else 0.0
        assert r.error is None, (task_id, agent, r.error, r.agent_output[-800:], r.verifier_output[-800:])
        assert r.reward == expected, (task_id, agent, layout, r.rewards, r.verifier_output[-1500:])
    # The TB1 image's FROM (ghcr.io/laude-institute/t-bench/...) was aliased to the local base image.
    assert results[("tb1-sum-numbers", "oracle", "tb1")].image.get("substituted_from", "").startswith(
        "ghcr.io/laude-institute/t-bench/")
    # pytest partial credit: the oracle passes all 3 tests; nop only "numbers untouched".
    for layout in ("tb1", "harbor"):
        oracle, nop = results[("tb1-sum-numbers", "oracle", layout)], results[("tb1-sum-numbers", "nop", layout)]
        assert (oracle.passed, oracle.total) == (3, 3)
        assert (nop.passed, nop.total) == (1, 3)
    assert results[("tb1-sum-numbers", "oracle", "harbor")].rewards == {
        "reward": 1.0, "tests_passed": 3.0, "tests_total": 3.0}
