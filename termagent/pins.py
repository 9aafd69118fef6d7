"""Do the GPU pins install on every Python set-up may use? pip's resolver, per Python version, metadata only.

    python -m termagent.pins check constraints-gpu.txt --python-version 3.11
    python -m termagent.pins check constraints-gpu-py312.txt --python-version 3.12

What it runs: `pip install --dry-run --ignore-installed --python-version X --only-binary :all: --platform
manylinux_2_35_x86_64 ... --report R -r REQS -c PINS`, where REQS is the project's requirements with the `dev`
and `gpu` extras plus every pin (so each pinned version must exist as a wheel for Python X on Linux x86_64, glibc
2.35 = Ubuntu 22.04, and the set must be consistent). Two things pip leaves out, checked here:
- pip evaluates environment markers against the interpreter it runs in, not --python-version (vLLM 0.30.0's
  `setuptools<81; python_version > "3.11"` is invisible to a dry run on 3.11 asked for 3.12): every resolved
  package's requirements are re-evaluated for Python X and checked against the pinned versions;
- `--only-binary :all:` cannot read an sdist: the few pure-Python pins published only as sdists are built once
  into a wheelhouse (`pip wheel --no-deps`, py3-none-any) that the dry run reads.
Every resolved package must be pinned in the file (an unpinned one, like gguf before, is an error).
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

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
GLIBC = (2, 35)  # Ubuntu 22.04's; 24.04 has 2.39 and reads the same wheels
# pip's two ways of saying a pin has no wheel for the target (the second when it is also a requirement)
NO_MATCH = re.compile(r"No matching distribution found for (\S+)|Cannot install (\S+==[^\s,]+) because")


class PinsError(RuntimeError):
    pass


def read_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = re.split(r"(===|==)", line, maxsplit=1)
        pins[canonicalize_name(name)] = version.strip()
    return pins


def project_requirements(extras: tuple[str, ...] = ("dev", "gpu")) -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [d for d in project["dependencies"] if canonicalize_name(Requirement(d).name) != "torch"]
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return reqs


def platform_args() -> list[str]:
    """pip takes the platform tags literally: every manylinux tag a glibc-2.35 host accepts."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC[1], 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    return [arg for tag in tags for arg in ("--platform", tag)]


def dry_run(pins_file: Path, python_version: str, wheelhouse: Path, pip: list[str] | None = None,
            max_builds: int = 10) -> dict:
    """pip's report of the resolution; builds sdist-only pins into `wheelhouse` as pip asks for them."""
    pip = pip or [sys.executable, "-m", "pip"]
    pins = read_pins(pins_file)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text("\n".join(project_requirements() + [f"{n}=={v}" for n, v in sorted(pins.items())]) + "\n")
        report = Path(tmp) / "report.json"
        built: set[str] = set()
        for _ in range(max_builds + 1):
            proc = subprocess.run(
                [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--python-version", python_version,
                 *platform_args(), "--only-binary", ":all:", "--find-links", str(wheelhouse), "--report",
                 str(report), "-r", str(reqs), "-c", str(pins_file)],
                capture_output=True, text=True, check=False)
            if proc.returncode == 0:
                return json.loads(report.read_text())
            missing = [a or b for a, b in NO_MATCH.findall(proc.stderr + proc.stdout)]
            if not missing or missing[0] in built or not _build_pure_wheel(pip, missing[0], wheelhouse):
                raise PinsError(f"{pins_file} does not resolve on Python {python_version}:\n"
                                + "\n".join(line for line in (proc.stderr + proc.stdout).splitlines()
                                            if not line.startswith("WARNING: Location"))[-3000:])
            built.add(missing[0])
    raise PinsError(f"{pins_file}: more than {max_builds} sdist-only pins")


def _build_pure_wheel(pip: list[str], requirement: str, wheelhouse: Path) -> bool:
    """An sdist-only pin as a py3-none-any wheel (True), or False when it is not pure Python / not buildable."""
    name = requirement.split("==")[0]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "--no-binary", name, requirement, "-w", tmp],
                              capture_output=True, text=True, check=False)
        built = list(Path(tmp).glob("*-py3-none-any.whl"))
        if proc.returncode != 0 or not built:
            return False
        built[0].replace(wheelhouse / built[0].name)
    return True


def check_report(report: dict, pins: dict[str, str], python_version: str) -> list[str]:
    """What is wrong with a resolution for Python `python_version`: an unpinned or differently resolved package,
    or a requirement (markers evaluated for that Python) that a pinned version does not meet."""
    problems = []
    resolved = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}
    for name, version in sorted(resolved.items()):
        if name not in pins:
            problems.append(f"{name}=={version} is installed but not pinned")
        elif Version(pins[name]) != Version(version):
            problems.append(f"{name}: pinned {pins[name]}, resolved {version}")
    env = {"python_version": python_version, "python_full_version": python_version + ".0",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    for item in report["install"]:
        owner = canonicalize_name(item["metadata"]["name"])
        for text in item["metadata"].get("requires_dist") or []:
            req = Requirement(text)
            if req.marker is not None and not Marker(str(req.marker)).evaluate(env):
                continue
            name = canonicalize_name(req.name)
            if name not in pins:
                problems.append(f"{owner} requires {req} on Python {python_version}: {name} is not pinned")
            elif not SpecifierSet(str(req.specifier)).contains(Version(pins[name]), prereleases=True):
                problems.append(f"{owner} requires {req} on Python {python_version}: pinned {name}=={pins[name]}")
    return sorted(set(problems))


def check(pins_file: Path, python_version: str, wheelhouse: Path) -> list[str]:
    return check_report(dry_run(pins_file, python_version, wheelhouse), read_pins(pins_file), python_version)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m termagent.pins", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("check")
    cp.add_argument("pins", type=Path)
    cp.add_argument("--python-version", required=True)
    cp.add_argument("--wheelhouse", type=Path, default=Path.home() / ".cache" / "termagent" / "sdist-wheels")
    args = ap.parse_args(argv)
    try:
        problems = check(args.pins, args.python_version, args.wheelhouse)
    except PinsError as e:
        print(e, file=sys.stderr)
        return 1
    for p in problems:
        print(p)
    print(f"{args.pins} on Python {args.python_version}: {'OK' if not problems else f'{len(problems)} problems'}",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
