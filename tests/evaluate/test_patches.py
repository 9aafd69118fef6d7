"""Every patches/*.patch applies to the pinned Harbor wheel's source (patch --dry-run -p1).
The wheel is fetched from PyPI once into ~/.cache/termagent; without network the test skips."""

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

PATCHES = sorted((Path(__file__).resolve().parents[2] / "patches").glob("*.patch"))


@pytest.fixture(scope="module")
def harbor_source(tmp_path_factory, harbor_wheel):
    """The pinned wheel (tests/conftest.py's harbor_wheel), unpacked."""
    if shutil.which("patch") is None:
        pytest.skip("the `patch` program is not installed")
    root = tmp_path_factory.mktemp("harbor")
    with zipfile.ZipFile(harbor_wheel) as whl:
        whl.extractall(root)
    return root


def test_there_is_a_patch():
    assert PATCHES, "patches/ holds no *.patch file"


@pytest.mark.parametrize("patch_file", PATCHES, ids=[p.name for p in PATCHES])
def test_patch_applies_to_pinned_harbor(harbor_source, patch_file):
    result = subprocess.run(["patch", "--dry-run", "-p1", "-d", str(harbor_source), "-i", str(patch_file)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout and "Reversed" not in result.stdout


def test_decoder_prompt_phrase_is_what_the_patch_adds(harbor_source):
    source = (harbor_source / "harbor" / "llms" / "lite_llm.py").read_text()
    assert "longer than the maximum model length" not in source  # 0.25.0 lacks it: the patch is needed
    assert "def _is_context_length_error" in source
