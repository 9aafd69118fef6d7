"""Sandbox fixtures: a Sandbox on the session's base image, and small Harbor task directories written
on the fly (loaded through the real loader, so the sandbox sees exactly what it will in production)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from termagent.tasks.load import load_task
from termagent.tasks.model import Task

FIXTURES = Path(__file__).parent / "fixtures"
REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
# The fixture tasks' own tests run inside containers, never on the host.
collect_ignore_glob = ["fixtures/*"]

# test.sh that grades with pytest and writes reward.txt, as the bundled tasks do
PYTEST_TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
python3 -m pytest -q -rA -p no:cacheprovider /tests/test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.fixture(scope="session")
def sandbox(base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig

    return Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4, output_limit_bytes=4096),
                   client=docker_client)


def write_harbor_task(root: Path, name: str, *, instruction: str | None = None, test_sh: str = PYTEST_TEST_SH,
                      tests: dict[str, str] | None = None, solve_sh: str | None = "#!/bin/bash\ntrue\n",
                      dockerfile: str | None = None, docker_image: str | None = None, agent_timeout: float = 60,
                      verifier_timeout: float = 60, memory_mb: int = 256, network: str = "no-network",
                      extra_toml: str = "") -> Path:
    """root/name in Harbor's layout: task.toml, instruction.md, environment/ (a Dockerfile, or none with
    [environment].docker_image), tests/test.sh (+ `tests` files), solution/solve.sh. Returns the directory."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    image_line = f'docker_image = "{docker_image}"\n' if docker_image else ""
    (task / "task.toml").write_text(textwrap.dedent(f"""\
        version = "1.0"

        [metadata]
        difficulty = "easy"
        category = "file_ops"
        tags = ["file_ops"]

        [agent]
        timeout_sec = {agent_timeout}

        [verifier]
        timeout_sec = {verifier_timeout}

        [environment]
        cpus = 1
        memory_mb = {memory_mb}
        network_mode = "{network}"
        """) + image_line + extra_toml)
    (task / "instruction.md").write_text(instruction or f"Fixture task {name}.\n")
    if dockerfile:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "tests" / "test.sh").write_text(test_sh)
    for file, text in (tests or {}).items():
        (task / "tests" / file).write_text(text)
    if solve_sh is not None:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text(solve_sh)
    return task


@pytest.fixture
def make_task(tmp_path, base_image):
    """make_task(name, test_sh=..., tests={file: text}, solve_sh=..., dockerfile=None, **task.toml values)
    -> Task. Without a dockerfile the task runs on the base image directly ([environment].docker_image)."""

    def make(name: str = "t", *, dockerfile: str | None = None, **kwargs) -> Task:
        return load_task(write_harbor_task(tmp_path, name, dockerfile=dockerfile,
                                           docker_image=None if dockerfile else base_image.tag, **kwargs))

    return make
