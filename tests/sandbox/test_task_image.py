"""Task images: the alias table rewrites FROM lines by policy; builds are cached and fail with the log."""

from __future__ import annotations

import uuid

import pytest

from termagent.sandbox import Sandbox, SandboxConfig
from termagent.sandbox.errors import BuildError
from termagent.sandbox.task_image import ImageResolver

ALIASES = {"ubuntu:*": "base", "python:*": "base", "ghcr.io/laude-institute/t-bench/*": "base"}


def resolver(policy="alias-first", client=None) -> ImageResolver:
    return ImageResolver(client, "termagent-base:abc", policy, ALIASES)


def test_alias_first_rewrites_only_matching_images_and_keeps_stages():
    dockerfile = ("ARG X=1\nFROM --platform=linux/amd64 python:3.12-slim AS builder\nRUN make\n"
                  "FROM builder\nFROM ghcr.io/laude-institute/t-bench/python-3-13:20250620 as final\n"
                  "FROM alpine:3.20\nFROM ${BASE}\n")
    text, subs = resolver().rewrite_dockerfile(dockerfile)
    assert subs == [("python:3.12-slim", "termagent-base:abc"),
                    ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "termagent-base:abc")]
    assert text.splitlines() == ["ARG X=1", "FROM --platform=linux/amd64 termagent-base:abc AS builder", "RUN make",
                                 "FROM builder", "FROM termagent-base:abc as final", "FROM alpine:3.20",
                                 "FROM ${BASE}"]


def test_never_policy_leaves_the_dockerfile_alone():
    text, subs = resolver("never").rewrite_dockerfile("FROM ubuntu:24.04\n")
    assert text == "FROM ubuntu:24.04\n" and subs == []


@pytest.mark.docker
def test_pull_first_falls_back_to_the_base_image_only_when_unpullable(base_image, docker_client):
    images = ImageResolver(docker_client, base_image.tag, "pull-first",
                           {"ubuntu:*": "base", "termagent-test-present:*": "base"})
    docker_client.images.get(base_image.tag).tag("termagent-test-present", "v1")
    try:
        assert images.resolve("ubuntu:24.04") == base_image.tag  # not present, not pullable offline
        assert images.resolve("termagent-test-present:v1") == "termagent-test-present:v1"  # present: kept
    finally:
        docker_client.images.remove("termagent-test-present:v1")


@pytest.mark.docker
def test_task_image_is_built_once_then_cached(sandbox, make_task):
    task = make_task("cached-build", dockerfile="FROM python:3.12-slim\nRUN echo built > /built.txt\n")
    first, second = sandbox.prepare(task), sandbox.prepare(task)
    assert second.cached and second.tag == first.tag and second.id == first.id
    assert first.substituted_from == "python:3.12-slim" and first.substituted_to.startswith("termagent-flavour:py-")
    (alias,) = first.to_dict()["substitutions"]
    assert alias["kind"] == "python" and alias["python"]["requested"] == "3.12"  # recorded with the image
    with sandbox.trial(task, image=second) as trial:
        assert trial.exec("cat /built.txt", timeout=10).output == "built\n"


@pytest.mark.docker
def test_build_failure_is_a_build_error_with_the_log_tail(sandbox, make_task):
    task = make_task("broken-build", dockerfile="FROM debian:bookworm-slim\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(BuildError) as info:
        sandbox.prepare(task)
    assert "broken-build" in str(info.value) and "about-to-fail" in str(info.value)


@pytest.mark.docker
def test_build_timeout_is_a_build_error(sandbox, make_task):
    # The engine may finish an abandoned build after the client gave up and tag it: a fresh Dockerfile
    # per run keeps a rerun on the same engine from finding that image cached.
    nonce = uuid.uuid4().hex
    task = make_task("slow-build", dockerfile=f"FROM debian:bookworm-slim\nRUN sleep 120 && echo {nonce}\n",
                     extra_toml="build_timeout_sec = 3\n")
    with pytest.raises(BuildError, match="timed out"):
        sandbox.prepare(task)


@pytest.mark.docker
def test_unknown_docker_image_is_a_build_error(base_image, docker_client, make_task):
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, image_policy="never", reap_on_start=False),
                      client=docker_client)
    task = make_task("missing-image", extra_toml="")
    task = task.__class__(**{**task.__dict__, "environment": task.environment.__class__(
        **{**task.environment.__dict__, "docker_image": "example.invalid/nothing:1"})})
    with pytest.raises(BuildError, match="neither present nor pullable"):
        sandbox.prepare(task)


def test_the_build_context_undoes_a_dvc_links_read_only_modes(tmp_path):
    """A DVC-versioned task tree (data/generated) sits in the workspace as read-only links into the cache: the
    archive sent to the engine carries the write bit back (0444 -> 0644, 0555 -> 0755); other modes stay."""
    import os
    import tarfile

    from termagent.sandbox.task_image import build_context

    (tmp_path / "files").mkdir()
    for name, mode in (("data.txt", 0o444), ("run.sh", 0o555), ("key", 0o600), ("plain.ini", 0o644)):
        (tmp_path / "files" / name).write_text(name)
        os.chmod(tmp_path / "files" / name, mode)
    (tmp_path / ".dockerignore").write_text("# comment\nfiles/plain.ini\n")
    dockerfile = tmp_path.parent / f"{tmp_path.name}.Dockerfile"  # outside the context, as ImageResolver writes it
    dockerfile.write_text("FROM scratch\nCOPY files/ /app/\n")
    archive, name = build_context(tmp_path, str(dockerfile))
    with tarfile.open(fileobj=archive) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
        assert tar.extractfile(name).read() == dockerfile.read_bytes()
    assert modes["files/data.txt"] == 0o644 and modes["files/run.sh"] == 0o755 and modes["files/key"] == 0o600
    assert "files/plain.ini" not in modes  # .dockerignore applied, as docker-py's own build(path=...) does


@pytest.mark.docker
def test_dvc_protected_task_inputs_reach_the_container_writable(sandbox, make_task):
    task = make_task("dvc-protected", dockerfile="FROM debian:bookworm-slim\nCOPY files/ /app/\n")
    env_dir = task.environment.dockerfile.parent
    (env_dir / "files").mkdir()
    for name, mode in (("data.txt", 0o444), ("run.sh", 0o555)):
        (env_dir / "files" / name).write_text(f"{name} {uuid.uuid4().hex}\n")  # a fresh image key per run
        (env_dir / "files" / name).chmod(mode)
    from termagent.tasks.load import load_task

    task = load_task(env_dir.parent)
    image = sandbox.prepare(task)
    with sandbox.trial(task, image=image) as trial:
        assert trial.exec("stat -c '%n %a' /app/data.txt /app/run.sh", timeout=10).output.split("\n")[:2] == [
            "/app/data.txt 644", "/app/run.sh 755"]
