"""The stages find the Harbor that set-up installed (.venv-harbor), with nothing exported (issue 35, defect 1).

The layout is built for real: a venv of its own with the pinned Harbor wheel pip-installed into it (no
dependencies: only its files are read; `--ignore-requires-python` because this machine's Python is 3.11 and
Harbor asks for >= 3.12, which changes nothing about where pip puts the package), and the `harbor` command linked
into the project venv's bin/ as scripts/setup.sh does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from termagent.protocol.harbor import ENV_VAR, HarborPackageError, Terminus2Texts, locate_harbor

HARBOR_VERSION = "0.25.0"


@pytest.fixture(scope="module")
def harbor_venv(harbor_wheel, tmp_path_factory) -> Path:
    """<project>/.venv-harbor with harbor==0.25.0 installed by pip from the pinned wheel."""
    project = tmp_path_factory.mktemp("project")
    venv = project / ".venv-harbor"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--ignore-requires-python", str(harbor_wheel)], check=True, timeout=300)
    return venv


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no uv, no harbor command but the ones a test links


def test_stage_finds_setups_harbor_venv_in_the_project(harbor_venv, no_env, monkeypatch):
    monkeypatch.chdir(harbor_venv.parent)  # a stage runs in the project root
    source = locate_harbor(None)
    assert source.version == HARBOR_VERSION
    assert ".venv-harbor" in source.how
    assert source.location.is_relative_to(harbor_venv)
    texts = Terminus2Texts.load(source)  # the texts the demos stage renders with
    assert "{instruction}" in texts.initial_prompt


def test_stage_finds_harbor_through_the_linked_command(harbor_venv, no_env, monkeypatch, tmp_path):
    # Another working directory (no .venv-harbor there): the `harbor` link in the project venv leads to it.
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "harbor").symlink_to(harbor_venv / "bin" / "harbor")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    source = locate_harbor(None)
    assert "`harbor` on PATH" in source.how
    assert source.location.is_relative_to(harbor_venv)
    assert Terminus2Texts.load(source).initial_prompt


def test_without_any_harbor_the_error_says_what_to_run(no_env, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    import termagent.protocol.harbor as module

    monkeypatch.setattr(module, "__file__", str(tmp_path / "termagent" / "protocol" / "harbor.py"))
    if module.importlib.util.find_spec("harbor") is not None:
        pytest.skip("a `harbor` package is importable in this interpreter")
    with pytest.raises(HarborPackageError, match=r"\.venv-harbor.*make setup"):
        locate_harbor(None)
