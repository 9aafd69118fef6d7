"""The no-build path (termagent/sandbox/placement.py): a simple Dockerfile's files placed into a container
of the FROM image give the same container as `docker build` (files, contents, modes, ownership,
workdir, env, user), and anything else is still built."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from termagent.sandbox import Sandbox, SandboxConfig, placement
from termagent.tasks.load import load_task

FILES = ("find /app /opt/tools /srv /data /usr/local/bin -printf '%p %m %u %g %s %y\\n' | sort; "
         "find /app /opt/tools /srv /data /usr/local/bin -type f -exec sha256sum {} + | sort")
PROCESS = "echo pwd=$(pwd); echo user=$(id -un); echo greeting=$GREETING; echo mode=$MODE; echo path=$PATH"

DOCKERFILE = """\
# a simple Dockerfile: no RUN
FROM debian:bookworm-slim
WORKDIR /srv
ENV GREETING=hello MODE="a b"
COPY files/ /app/
COPY extra.sh notes.txt /opt/tools/
ADD notes.txt /srv/notes-copy.txt
COPY files/bin/run.sh \\
     /srv/run-copy.sh
WORKDIR /data
COPY notes.txt .
COPY files/a.txt /data
COPY extra.sh /usr/local/bin
WORKDIR /app
USER nobody
"""


def write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def make_task(root: Path, dockerfile: str = DOCKERFILE) -> Path:
    task = root / "placement-task"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    env = task / "environment"
    write(env / "files" / "a.txt", "alpha\n", 0o644)
    write(env / "files" / "bin" / "run.sh", "#!/bin/sh\necho run\n", 0o755)
    write(env / "files" / "secret" / "key", "s3cret\n", 0o600)
    write(env / "files" / "deep" / "x" / "y.txt", "why\n", 0o640)
    os.chmod(env / "files" / "secret", 0o700)
    write(env / "extra.sh", "echo extra\n", 0o755)
    write(env / "notes.txt", "notes\n", 0o640)
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "task.toml").write_text(textwrap.dedent("""\
        version = "1.0"
        [metadata]
        difficulty = "easy"
        [environment]
        network_mode = "no-network"
        """))
    write(task / "tests" / "test.sh", "echo 1 > /logs/verifier/reward.txt\n", 0o755)
    return task


def snapshot(sandbox: Sandbox, task) -> str:
    with sandbox.trial(task) as trial:
        files = trial.exec(FILES, timeout=30, user="root")  # USER nobody could not read them all
        process = trial.exec(PROCESS, timeout=30)  # the Dockerfile's workdir, user and env
        assert files.rc == 0 and process.rc == 0, files.output + process.output
        return files.output + process.output


def test_plan_reads_simple_dockerfiles_only(tmp_path):
    task = load_task(make_task(tmp_path))
    p = placement.plan(task)
    assert p is not None and p.from_image == "debian:bookworm-slim"
    assert p.workdir == "/app" and p.user == "nobody" and dict(p.env) == {"GREETING": "hello", "MODE": "a b"}
    paths = {path: mode for path, _, mode in p.entries}
    assert paths["/app/bin/run.sh"] == 0o755 and paths["/app/secret"] == 0o700 and paths["/srv/notes-copy.txt"] == 0o640
    assert "/opt/tools/extra.sh" in paths and "/srv/run-copy.sh" in paths
    # a file copied to "." or to a directory an earlier WORKDIR made goes into it, as the builder does;
    # one copied to a path the Dockerfile did not make is decided against the image at placement
    assert "/data/notes.txt" in paths and "/data/a.txt" in paths and "/data" not in paths
    assert ("/usr/local/bin", "extra.sh") in p.file_dests and ("/srv/notes-copy.txt", "notes.txt") in p.file_dests
    for extra in ("RUN echo hi", "ARG X=1", "COPY --chown=nobody files/ /app/", "ADD https://example.invalid/x /x",
                  "FROM debian:bookworm-slim AS second"):
        other = load_task(make_task(tmp_path / extra.split()[0].lower() / str(abs(hash(extra))), DOCKERFILE + extra + "\n"))
        assert placement.plan(other) is None, extra


def test_generated_instance_is_simple(tmp_path):
    from termagent.tasks.families import FAMILIES, generate, instance_rng

    for family in FAMILIES:
        task = load_task(generate(family, instance_rng(0, family, 0), 0, tmp_path))
        p = placement.plan(task)
        assert p is not None and p.workdir == "/app", family
        assert all(path.startswith("/app/") for path, _, _ in p.entries), family


def test_placed_container_equals_built_one(tmp_path, base_image, docker_client):
    task = load_task(make_task(tmp_path))
    built = Sandbox(SandboxConfig(base_image=base_image.tag, warm_pool=0, place_files=False), client=docker_client)
    placed = Sandbox(SandboxConfig(base_image=base_image.tag, warm_pool=0, place_files=True), client=docker_client)
    try:
        built_image, placed_image = built.prepare(task), placed.prepare(task)
        assert not isinstance(built_image, placement.PlacedImage) and built_image.tag.startswith("termagent-task/")
        # the placed container starts the image the build would have started FROM (debian:* -> its stand-in)
        assert isinstance(placed_image, placement.PlacedImage)
        assert placed_image.tag == placed.images.resolve("debian:bookworm-slim")
        assert [s["from"] for s in placed_image.substitutions] == ["debian:bookworm-slim"]
        built_out = snapshot(built, task)
        placed_out = snapshot(placed, task)
    finally:
        built.close()
        placed.close()
    assert "/app/secret 700 root root" in built_out and "user=nobody" in built_out  # the snapshot sees it all
    # `COPY notes.txt .` after `WORKDIR /data`, and `COPY extra.sh /usr/local/bin` (a directory of the image):
    # into the directory (placed as files named /data, /usr/local/bin before: "/app is not a directory")
    assert "/data 755 root root" in built_out and "/data/notes.txt 640 root root" in built_out
    assert "/usr/local/bin/extra.sh 755 root root" in built_out
    assert placed_out == built_out
    docker_client.images.remove(built_image.tag, force=True)


def test_not_simple_is_built(tmp_path, base_image, docker_client):
    task = load_task(make_task(tmp_path, DOCKERFILE.replace("USER nobody", "RUN chmod 600 /app/a.txt")))
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, warm_pool=0), client=docker_client)
    try:
        image = sandbox.prepare(task)
        assert not isinstance(image, placement.PlacedImage)
        with sandbox.trial(task, image=image) as trial:
            assert trial.exec("stat -c %a /app/a.txt").output.strip() == "600"
    finally:
        sandbox.close()
    docker_client.images.remove(image.tag, force=True)
