"""Does the committed dvc.lock tell the truth about the tree? For every stage it holds: the command, every
git-tracked dependency (code, committed data, params.yaml's keys) hashed as DVC hashes it, against what the lock
recorded. Outputs and the dependencies other stages produce are not compared: a clean clone lacks them, and
`dvc status` then says "not in cache" / "deleted", which is the truth.

    python scripts/lock_truth.py            # the stale stages and what changed; exit 1 if any
    python scripts/lock_truth.py --json     # the same as {stage: [changes]}
    python scripts/lock_truth.py --prune    # drop the stale stages' entries from dvc.lock (atomic rewrite)

A pruned stage is one DVC has no record of: `dvc status` lists every dependency of it as "modified" and its
outputs as "deleted" (DVC has no "never run" state), and `dvc repro` runs it, as it would a stale one. Prune the
committed lock only after keeping the run's full lock (metrics/runs/<run>/dvc.lock). docs/dvc.md#the-committed-lock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]


def git_tracked(root: Path) -> set[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.decode()
    return set(filter(None, out.split("\0")))


def is_tracked(path: str, tracked: set[str]) -> bool:
    """A file git holds, or a folder holding at least one."""
    prefix = path.rstrip("/") + "/"
    return path in tracked or any(t.startswith(prefix) for t in tracked)


def stale_stages(root: Path = REPO) -> dict[str, list[str]]:
    """{stage: [what no longer matches]} for every stage dvc.lock holds, read through DVC's own loader and hashing
    (the lock's recorded hashes against the workspace's)."""
    import yaml
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    locked = set((yaml.safe_load((root / "dvc.lock").read_text()) or {}).get("stages") or {})
    tracked = git_tracked(root)
    produced: set[str] = set()
    stale: dict[str, list[str]] = {}
    with Repo(str(root)) as repo:
        stages = [s for s in repo.index.stages if s.cmd]
        for stage in stages:
            produced.update(out.def_path for out in stage.outs)
        for stage in stages:
            name = stage.addressing.split(":")[-1]
            if name not in locked:
                continue
            changes = ["command changed"] if getattr(stage, "cmd_changed", False) else []
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    for path, keys in dep.workspace_status().items():
                        changes += [f"{path}: {key} {state}" for key, state in sorted(keys.items())]
                elif dep.def_path not in produced and is_tracked(dep.def_path, tracked):
                    changes += [f"{path}: {state}" for path, state in dep.workspace_status().items()]
            if changes:
                stale[name] = changes
    return stale


def prune(lock_path: Path, names: set[str]) -> None:
    """dvc.lock without the stages `names`, the rest as DVC wrote it."""
    from ruamel.yaml import YAML

    from termagent import atomic

    yaml = YAML()
    yaml.width = 4096
    lock = yaml.load(lock_path.read_text())
    for name in names:
        del lock["stages"][name]
    with atomic.target(lock_path) as tmp, open(tmp, "w") as fh:
        yaml.dump(lock, fh)


@click.command()
@click.option("--prune", "do_prune", is_flag=True, help="Remove the stale stages' entries from dvc.lock.")
@click.option("--json", "as_json", is_flag=True, help="Print {stage: [changes]}.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=REPO, show_default=True,
              help="The DVC repository (a git checkout) to check.")
def main(do_prune: bool, as_json: bool, root: Path) -> None:
    stale = stale_stages(root)
    if as_json:
        click.echo(json.dumps(stale, indent=2))
    else:
        for name, changes in stale.items():
            click.echo(f"{name}: " + "; ".join(changes))
        click.echo(f"{len(stale)} stage(s) of dvc.lock recorded against other code or params than the tree"
                   if stale else "dvc.lock matches the tree: every locked stage's command, code and params")
    if do_prune and stale:
        prune(root / "dvc.lock", set(stale))
        click.echo(f"dvc.lock: pruned {', '.join(stale)}")
    elif stale:
        sys.exit(1)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
