"""The committed dvc.lock records the params the committed params.yaml holds: on a clean clone `dvc status`
reports the code and data that changed, never a lock written under other params (a seed of another run, a value
changed after the run). Every params key a locked stage recorded must have that value in params.yaml; a stage
of dvc.yaml missing from the lock is allowed (not run yet)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def lookup(tree: dict, dotted: str):
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return KeyError
        node = node[part]
    return node


def stale_params(lock: dict, params: dict) -> list[str]:
    out = []
    for name, stage in (lock.get("stages") or {}).items():
        for key, recorded in ((stage.get("params") or {}).get("params.yaml") or {}).items():
            now = lookup(params, key)
            if now != recorded:
                out.append(f"{name}: {key} = {recorded!r} in dvc.lock, {'missing' if now is KeyError else repr(now)} "
                           "in params.yaml")
    return out


def test_the_committed_lock_was_written_under_the_committed_params():
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    assert stale_params(lock, params) == []


def test_a_lock_from_another_seed_is_caught():
    lock = {"stages": {"warmup": {"params": {"params.yaml": {"seed": 1, "warmup.max_steps": 24}}}}}
    assert stale_params(lock, {"seed": 0, "warmup": {"max_steps": 24}}) == [
        "warmup: seed = 1 in dvc.lock, 0 in params.yaml"]
    assert stale_params(lock, {"seed": 1, "warmup": {"max_steps": 24}}) == []
