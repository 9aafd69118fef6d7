"""Regenerate constraints-gpu.txt: the GPU machine's pins (see docs/gpu-setup.md).

    python scripts/pin_gpu.py            # resolves with pip (metadata only, nothing installed), writes the file

Start: constraints.txt (the CPU run's pins) without torch, plus the project's requirements, the `gpu` extra's
vLLM and torch's plain (CUDA, the default Linux wheel) build. pip resolves them for this interpreter on Linux
x86_64 (`pip install --dry-run --ignore-installed --report`); a CPU pin that conflicts with vLLM's own
requirements is released (named in the file's header) and the resolution retried. The result pins every
package of the resolved set.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from termagent.setup_plan import GPU_PINS

CONFLICT = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9_.\-]+)==")


def requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = [d for d in project["dependencies"] if not d.startswith("torch")]
    return [*deps, *project["optional-dependencies"]["dev"], *(f"{k}{v}" for k, v in GPU_PINS.items())]


def resolve(reqs: list[str], pins: dict[str, str], workdir: Path) -> tuple[dict[str, str] | None, str]:
    (workdir / "req.txt").write_text("\n".join(reqs) + "\n")
    (workdir / "c.txt").write_text("".join(f"{k}=={v}\n" for k, v in sorted(pins.items())))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                           "--prefer-binary", "--report", str(workdir / "r.json"), "-r", str(workdir / "req.txt"),
                           "-c", str(workdir / "c.txt")], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None, proc.stdout + proc.stderr
    report = json.loads((workdir / "r.json").read_text())
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}, ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "constraints-gpu.txt"))
    args = ap.parse_args()
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#") and "==" in line:
            name, version = line.split("==", 1)
            if name.lower() != "torch":
                pins[name] = version
    released: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        while True:
            resolved, log = resolve(requirements(), pins, Path(tmp))
            if resolved is not None:
                break
            conflicts = [name for name in CONFLICT.findall(log) if name in pins]
            if not conflicts:
                raise SystemExit(f"pip could not resolve the GPU set:\n{log[-4000:]}")
            for name in conflicts:
                released.append(f"{name}=={pins.pop(name)}")
            print(f"released {conflicts} (vLLM needs other versions); resolving again", file=sys.stderr)
    resolved.pop("termagent", None)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    header = [
        "# The GPU machine's pins (scripts/setup.sh on a machine with an NVIDIA driver; docs/gpu-setup.md).",
        f"# Made by scripts/pin_gpu.py (Python {py}, Linux x86_64): constraints.txt's pins without torch, plus",
        "# vLLM and torch's default (CUDA) Linux wheel, resolved by pip. CPU pins released because vLLM",
        f"# requires other versions: {', '.join(released) or 'none'}.",
        "# torch is pinned with `===` so that an installed 2.13.0+cpu build does not satisfy it (`==` would).",
    ]
    lines = [f"{name}==={version}" if name == "torch" else f"{name}=={version}"
             for name, version in sorted(resolved.items(), key=lambda kv: kv[0].lower())]
    Path(args.out).write_text("\n".join(header + lines) + "\n")
    print(f"{args.out}: {len(lines)} pins; released {released}")


if __name__ == "__main__":
    main()
