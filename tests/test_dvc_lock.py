"""The committed dvc.lock records the params the committed params.yaml holds: on a clean clone `dvc status`
reports the code and data that changed, never a lock written under other params (a seed of another run, a value
changed after the run). Every params key a locked stage recorded must have that value in params.yaml; a stage
of dvc.yaml missing from the lock is allowed (not run yet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# The whole lock against the tree (scripts/lock_truth.py): command, git-tracked deps hashed by DVC, params.

sys.path.insert(0, str(REPO / "scripts"))
from lock_truth import prune, stale_stages

SCRATCH_YAML = """\
stages:
  prepare:
    cmd: python prepare.py
    deps: [prepare.py, src]
    params: [prepare.size]
    outs: [data.txt]
  train:
    cmd: python train.py
    deps: [train.py, data.txt]
    params: [train.steps]
    outs: [model.txt]
"""


def sh(args: list, cwd: Path) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "PATH": f"{DVC.parent}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


DVC = Path(sys.executable).parent / "dvc"


def test_the_committed_lock_matches_the_tree():
    """Every stage dvc.lock holds was recorded against this tree's command, code and params: a clean clone's
    `dvc status` shows it as missing from the cache, never as changed. `python scripts/lock_truth.py` says which
    stages are stale; `--prune` drops them (after the run's lock is kept under metrics/runs/<run>/)."""
    stale = stale_stages(REPO)
    assert stale == {}, "dvc.lock is stale (python scripts/lock_truth.py):\n" + "\n".join(
        f"{name}: {'; '.join(changes)}" for name, changes in stale.items())


def test_stale_stages_names_exactly_what_changed_and_prune_drops_only_those(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "util.py").write_text("X = 1\n")
    (tmp_path / "prepare.py").write_text("open('data.txt', 'w').write('data')\n")
    (tmp_path / "train.py").write_text("open('model.txt', 'w').write(open('data.txt').read() + ' model')\n")
    (tmp_path / "params.yaml").write_text("prepare:\n  size: 3\ntrain:\n  steps: 2\n")
    (tmp_path / "dvc.yaml").write_text(SCRATCH_YAML)
    sh(["git", "init", "-q"], tmp_path)
    sh([DVC, "init", "-q"], tmp_path)
    sh([DVC, "repro", "-q"], tmp_path)
    sh(["git", "add", "-A"], tmp_path)
    assert stale_stages(tmp_path) == {}

    (tmp_path / "src" / "util.py").write_text("X = 2\n")           # code in a folder dep
    (tmp_path / "params.yaml").write_text("prepare:\n  size: 4\ntrain:\n  steps: 2\n")
    sh(["git", "add", "-A"], tmp_path)
    assert stale_stages(tmp_path) == {"prepare": ["src: modified", "params.yaml: prepare.size modified"]}
    (tmp_path / "dvc.yaml").write_text(SCRATCH_YAML.replace("python train.py", "python train.py --fast"))
    assert stale_stages(tmp_path)["train"] == ["command changed"]

    prune(tmp_path / "dvc.lock", {"prepare"})
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"train"}
    # What DVC says of a stage the lock does not hold: every dep "modified", no "never run" state.
    status = json.loads(sh([DVC, "status", "--json", "prepare"], tmp_path))
    assert status["prepare"][0]["changed deps"] == {"prepare.py": "modified", "src": "modified",
                                                    "params.yaml": "new"}
