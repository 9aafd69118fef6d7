"""termagent sets OpenMP's wait policy to PASSIVE before torch loads (unless the environment chose one)."""

from __future__ import annotations

import os
import subprocess
import sys


def policy(env: dict) -> str:
    code = "import termagent, os; print(os.environ['OMP_WAIT_POLICY'])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_passive_by_default_and_an_explicit_choice_wins():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert policy(env) == "PASSIVE"
    assert policy({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"
