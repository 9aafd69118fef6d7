"""A scratch copy of the repository to run the DVC pipeline in (the pipeline tests): its tracked and unignored
files, a git repository of its own, profiles applied to its params.yaml, commands run with its own code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def env(root: Path) -> dict:
    out = dict(os.environ)
    out["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{out.get('PATH', '')}"
    out["PYTHONPATH"] = str(root)  # the copy's own code, not the checkout the venv was installed from
    return out


def run(args: list[str], cwd: Path, timeout: int = 3000) -> str:
    proc = subprocess.run(args, check=False, cwd=cwd, env=env(cwd), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed in {cwd}:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


def scratch_copy(root: Path, profiles: list[str | Path]) -> Path:
    """Copy the repository to `root`, apply `profiles` in order (`scripts/apply_profile.py`, a name under
    profiles/ or a .yaml path), and commit the result. Returns `root`."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    export_venv = REPO / ".venv-openvino-export"  # the export_openvino stage's exporter: shared, not rebuilt
    if export_venv.is_dir() and not (root / export_venv.name).exists():
        (root / export_venv.name).symlink_to(export_venv)
    run(["git", "init", "-q"], root)
    for profile in profiles:
        run([sys.executable, "scripts/apply_profile.py", str(profile)], root)
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "profiles: " + ", ".join(map(str, profiles))],
        root)
    return root
