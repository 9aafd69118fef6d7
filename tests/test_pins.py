"""The GPU pins install on every Python set-up may use (issue 35, defect 2): pip's resolver, per Python version.

`termagent.pins.check` runs `pip install --dry-run --ignore-installed --python-version X --only-binary :all:`
(Linux x86_64, glibc 2.35) on the project's requirements + every pin of the file set-up uses for Python X
(termagent.setup_plan.GPU_CONSTRAINTS), then re-checks each resolved package's requirements with markers
evaluated for X (pip evaluates them for the interpreter it runs in). Needs the package index: skipped, saying
so, when it is unreachable. ~1 min per Python (metadata only).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from termagent.pins import check, check_report, read_pins
from termagent.setup_plan import GPU_CONSTRAINTS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index_reachable(tmp_path_factory) -> None:
    probe = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            "--no-cache-dir", "-d", str(tmp_path_factory.mktemp("probe")), "six==1.17.0"],
                           capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode != 0:
        pytest.skip("the package index is unreachable (`pip download six==1.17.0` failed), so pip's resolver "
                    f"cannot check constraints-gpu*.txt: {probe.stderr.strip().splitlines()[-1:]}")


@pytest.mark.slow
@pytest.mark.parametrize("python", sorted(GPU_CONSTRAINTS))
def test_gpu_pins_resolve_with_pip_on_each_python(python, index_reachable):
    pins = REPO / GPU_CONSTRAINTS[python]
    problems = check(pins, python, Path.home() / ".cache" / "termagent" / "sdist-wheels")
    assert problems == [], f"{pins.name} on Python {python}:\n" + "\n".join(problems)


def report(setuptools_pin: str) -> tuple[dict, dict]:
    vllm = {"metadata": {"name": "vllm", "version": "0.30.0",
                         "requires_dist": ['setuptools<81.0.0,>=77.0.3; python_version > "3.11"', "gguf>=0.10"]}}
    setuptools = {"metadata": {"name": "setuptools", "version": setuptools_pin, "requires_dist": []}}
    gguf = {"metadata": {"name": "gguf", "version": "0.19.0", "requires_dist": []}}
    return {"install": [vllm, setuptools, gguf]}, {"vllm": "0.30.0", "setuptools": setuptools_pin, "gguf": "0.19.0"}


def test_markers_are_evaluated_for_the_target_python():
    """What a pip dry run on 3.11 asked for 3.12 misses: vLLM's setuptools cap applies on 3.12 only."""
    rep, pins = report("84.2.1")
    assert check_report(rep, pins, "3.11") == []
    [problem] = check_report(rep, pins, "3.12")
    assert "setuptools" in problem and "84.2.1" in problem and "3.12" in problem
    rep, pins = report("80.9.0")
    assert check_report(rep, pins, "3.12") == []


def test_an_unpinned_package_is_reported():
    rep, pins = report("80.9.0")
    del pins["gguf"]
    problems = check_report(rep, pins, "3.12")
    assert any("gguf==0.19.0 is installed but not pinned" in p for p in problems)


def test_every_python_file_pins_gguf_and_a_setuptools_vllm_accepts():
    for python, name in GPU_CONSTRAINTS.items():
        pins = read_pins(REPO / name)
        assert "gguf" in pins and "vllm" in pins and pins["torch"] == "2.13.0", name
        if python >= "3.12":
            assert 77 <= int(pins["setuptools"].split(".")[0]) < 81, name
