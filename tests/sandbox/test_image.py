"""The base image recipe: hash-tagged, mirror read from apt's config, the tools a task expects."""

from __future__ import annotations

import dataclasses

import pytest

from termagent.sandbox import reaper
from termagent.sandbox.errors import BuildError
from termagent.sandbox.image import BASE_PACKAGES, BaseImageRecipe, apt_mirror


def test_tag_carries_the_recipe_hash_and_changes_only_with_the_recipe():
    recipe = BaseImageRecipe()
    assert recipe.tag == f"termagent-base:{recipe.hash[:12]}"
    reordered = dataclasses.replace(recipe, packages=tuple(reversed(BASE_PACKAGES)))
    assert reordered.hash == recipe.hash
    assert dataclasses.replace(recipe, packages=BASE_PACKAGES + ("htop",)).hash != recipe.hash
    assert dataclasses.replace(recipe, suite="trixie").hash != recipe.hash
    assert dataclasses.replace(recipe, recipe="dockerfile").hash != recipe.hash


def test_mirror_is_read_from_deb822_sources_then_sources_list(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n")
    assert apt_mirror("bookworm", str(tmp_path)) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("# old style\ndeb [arch=amd64] http://old.example/debian trixie main\n")
    assert apt_mirror("trixie", str(tmp_path)) == "http://old.example/debian"
    with pytest.raises(BuildError, match="no apt mirror for suite 'sid'"):
        apt_mirror("sid", str(tmp_path))


@pytest.mark.docker
def test_base_image_has_the_tools_tasks_expect(base_image, docker_client):
    tools = "bash tmux python3 git ps jq sqlite3 make gcc curl tar gzip zip unzip ip nc timeout file bc awk"
    script = f"for t in {tools}; do command -v $t >/dev/null || echo MISSING $t; done; python3 -m pytest --version 2>&1"
    out = docker_client.containers.run(
        base_image.tag, ["bash", "-c", script],
        remove=True, network_mode="none", labels={reaper.LABEL: "1", reaper.OWNER_LABEL: reaper.owner_id()})
    assert b"MISSING" not in out and b"pytest" in out
    image = docker_client.images.get(base_image.tag)
    assert base_image.recipe.latest in image.tags


def test_debian_mirror_falls_back_to_the_host_suite_for_another_suite(tmp_path):
    from termagent.sandbox.image import debian_mirror

    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")
    assert debian_mirror("trixie", str(tmp_path)) == "http://mirror.example/debian"  # same mirror, other suite
    assert debian_mirror("bookworm", str(tmp_path)) == "http://mirror.example/debian"
