"""`sandbox.recipe: auto` (termagent/sandbox/image.py choose_recipe / resolve_recipe): the built image if there
is one, else debootstrap from the host's Debian mirror, else the registry's Dockerfile, else an error naming both.

The decision reads real apt configurations (Debian's deb822 file, an Ubuntu host's sources.list and deb822
file, written to a tmp dir as those systems ship them, with a neutral host name); the end-to-end cases ask this
machine's Docker engine and registry for real."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from termagent.params import load_params, section
from termagent.sandbox.errors import BuildError
from termagent.sandbox.image import (
    BaseImageRecipe,
    choose_recipe,
    debian_mirror,
    registry_status,
    resolve_recipe,
)
from termagent.sandbox.settings import SandboxParams

REPO = Path(__file__).resolve().parents[2]

DEBIAN_SOURCES = """\
Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
# Ubuntu 22.04 (sources.list) and 24.04 (deb822 ubuntu.sources), as installed
UBUNTU_LIST = """\
# See http://help.ubuntu.com/community/UpgradeNotes for how to upgrade to
# newer versions of the distribution.
deb http://mirror.invalid/ubuntu/ jammy main restricted
deb http://mirror.invalid/ubuntu/ jammy-updates main restricted
deb [arch=amd64] http://mirror.invalid/ubuntu/ jammy universe
deb http://mirror.invalid/ubuntu/ jammy-security main restricted
"""
UBUNTU_SOURCES = """\
Types: deb
URIs: http://mirror.invalid/ubuntu/
Suites: noble noble-updates noble-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
"""


def apt(tmp_path: Path, *, sources: str | None = None, sources_list: str | None = None,
        list_d: str | None = None) -> str:
    root = tmp_path / "apt"
    (root / "sources.list.d").mkdir(parents=True)
    if sources is not None:
        (root / "sources.list.d" / "system.sources").write_text(sources)
    if sources_list is not None:
        (root / "sources.list").write_text(sources_list)
    if list_d is not None:
        (root / "sources.list.d" / "extra.list").write_text(list_d)
    return str(root)


def test_a_debian_host_bootstraps_from_its_mirror(tmp_path):
    choice = choose_recipe("bookworm", apt_dir=apt(tmp_path, sources=DEBIAN_SOURCES))
    assert choice.recipe == "debootstrap" and "http://mirror.invalid/debian" in choice.reason
    # a suite the host does not list (trixie on a bookworm host): the same Debian mirror serves it
    assert choose_recipe("trixie", apt_dir=apt(tmp_path / "t", sources=DEBIAN_SOURCES)).recipe == "debootstrap"


@pytest.mark.parametrize("layout", ["sources.list", "deb822"])
def test_an_ubuntu_host_with_a_registry_builds_from_the_dockerfile(tmp_path, layout):
    apt_dir = (apt(tmp_path, sources_list=UBUNTU_LIST) if layout == "sources.list"
               else apt(tmp_path, sources=UBUNTU_SOURCES))
    with pytest.raises(BuildError, match="no apt mirror for suite 'bookworm'"):
        debian_mirror("bookworm", apt_dir)  # never the Ubuntu archive: it has no bookworm to bootstrap
    choice = choose_recipe("bookworm", apt_dir=apt_dir, registry="ok")
    assert choice.recipe == "dockerfile"
    assert "no apt mirror for suite 'bookworm'" in choice.reason and "debian:bookworm-slim" in choice.reason


def test_neither_way_is_an_error_saying_both(tmp_path):
    with pytest.raises(BuildError) as err:
        choose_recipe("bookworm", apt_dir=apt(tmp_path, sources_list=UBUNTU_LIST),
                      registry="the registry did not answer for debian:bookworm-slim (no such host)")
    text = str(err.value)
    assert "sandbox.recipe auto" in text
    assert "debootstrap: no apt mirror for suite 'bookworm'" in text
    assert "dockerfile: the registry did not answer for debian:bookworm-slim (no such host)" in text


def test_an_image_already_built_wins_and_debootstrap_needs_its_tool_and_root(tmp_path):
    debian = apt(tmp_path, sources=DEBIAN_SOURCES)
    ubuntu = apt(tmp_path / "u", sources_list=UBUNTU_LIST)
    assert choose_recipe("bookworm", apt_dir=ubuntu, present={"dockerfile"}).recipe == "dockerfile"
    assert choose_recipe("bookworm", apt_dir=debian, present={"dockerfile"}).recipe == "dockerfile"
    assert choose_recipe("bookworm", apt_dir=ubuntu, present={"debootstrap", "dockerfile"}).recipe == "debootstrap"
    no_tool = choose_recipe("bookworm", apt_dir=debian, debootstrap_tool=None, registry="ok")
    assert no_tool.recipe == "dockerfile" and "debootstrap is not installed" in no_tool.reason
    with pytest.raises(BuildError, match="debootstrap needs root"):
        choose_recipe("bookworm", apt_dir=debian, is_root=False, registry="no registry here")


def test_the_h100_profile_uses_auto_and_the_embedded_default_does_not():
    h100 = section(load_params(REPO / "params.yaml", REPO / "profiles/h100.yaml"), "sandbox", SandboxParams)
    embedded = section(load_params(REPO / "params.yaml"), "sandbox", SandboxParams)
    assert h100.recipe == "auto"
    assert embedded.recipe == "debootstrap" == BaseImageRecipe.recipe


# -- this machine's engine and registry ---------------------------------------------------------------------
@pytest.mark.docker
def test_auto_on_this_host_takes_the_built_image(docker_client, base_image):
    params = section(load_params(REPO / "params.yaml"), "sandbox", SandboxParams)
    auto = replace(params, recipe="auto")
    recipe, reason = resolve_recipe(replace(params.base_recipe(), recipe="auto"), docker_client)
    assert recipe.recipe in ("debootstrap", "dockerfile") and "already built" in reason
    assert recipe.tag == base_image.tag  # the same image the configured recipe built
    assert auto.base_recipe().tag == base_image.tag
    assert auto.sandbox_config().base_image == base_image.tag


@pytest.mark.docker
def test_auto_for_an_unbuilt_image_on_an_ubuntu_host_asks_the_registry(docker_client, tmp_path):
    ubuntu = apt(tmp_path, sources_list=UBUNTU_LIST)
    recipe = BaseImageRecipe(name="termagent-auto-test-never-built", recipe="auto")
    registry = registry_status(recipe.suite, docker_client)
    if registry == "ok":  # a host that can pull: the Dockerfile recipe (nothing is built here)
        resolved, _ = resolve_recipe(recipe, docker_client, apt_dir=ubuntu)
        assert resolved.recipe == "dockerfile" and resolved.tag == replace(recipe, recipe="dockerfile").tag
    else:  # an offline host: the error names both reasons, the registry's in the engine's own words
        assert "debian:bookworm-slim" in registry
        with pytest.raises(BuildError, match=r"debootstrap: no apt mirror.*dockerfile: the registry did not answer"):
            resolve_recipe(recipe, docker_client, apt_dir=ubuntu)
