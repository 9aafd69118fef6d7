"""data/image.json is content-addressed: the recipe and the package versions dpkg reports inside the
image, never the local image id. Rebuilding the same recipe gives a new image id but the same record,
byte for byte, so a new machine (or a rebuild) does not rerun the task-running stages."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import docker
import pytest

from termagent.params import load_params, section
from termagent.sandbox.image import build_base_image, describe
from termagent.sandbox.settings import SandboxParams

from .conftest import REPO_PARAMS

REPO = REPO_PARAMS.parent
pytestmark = pytest.mark.docker


def record_bytes(base) -> bytes:
    return json.dumps(base.record(), indent=2).encode()


def test_the_stage_records_recipe_and_resolved_packages_and_puts_the_id_in_the_sidecar(base_image, tmp_path):
    out, local = tmp_path / "image.json", tmp_path / "image.local.json"
    for _ in range(2):
        subprocess.run([sys.executable, "stages/image.py", "--out", str(out), "--local", str(local)], cwd=REPO,
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    record, sidecar = json.loads(out.read_text()), json.loads(local.read_text())
    assert record["image"] == base_image.tag and "id" not in record and "size_bytes" not in record
    assert record["recipe_hash"].startswith(base_image.tag.split(":")[1])
    # The versions come from inside the image: every requested package is installed, with a version.
    installed = {name.split(":")[0]: version for name, version in record["installed"].items()}
    assert set(record["packages"]) <= set(installed) and all(installed.values())
    assert sidecar["id"] == base_image.id and sidecar["image"] == base_image.tag


@pytest.mark.slow
def test_a_rebuild_under_a_new_tag_gives_a_new_id_and_the_same_record(base_image, docker_client):
    recipe = section(load_params(REPO_PARAMS), "sandbox", SandboxParams).base_recipe()
    first = describe(recipe, docker_client.images.get(base_image.tag), docker_client)
    tag = f"termagent-record-test:{os.getpid()}"
    try:
        rebuilt = describe(recipe, build_base_image(recipe, docker_client, progress=False, tag=tag), docker_client)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag)  # only the tag this test made
    assert rebuilt.id != first.id, "the rebuild should be a new image (debootstrap is not bit-reproducible)"
    assert record_bytes(rebuilt) == record_bytes(first)
    assert rebuilt.local() != first.local()
