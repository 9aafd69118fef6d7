"""After a runner is killed with SIGKILL mid-trial, the next Sandbox start removes its containers;
containers of live runs are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from termagent.sandbox import Sandbox, SandboxConfig, reaper

pytestmark = pytest.mark.docker

RUNNER = textwrap.dedent("""\
    import sys, time
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task
    sandbox = Sandbox(SandboxConfig(base_image=sys.argv[2], reap_on_start=False, warm_pool=1))
    task = load_task(sys.argv[1])
    sandbox.expect([(task, "victim", 1)])  # a container started ahead for a trial that never comes
    with sandbox.trial(task, agent_name="victim") as trial:
        print(trial.container_id, flush=True)
        time.sleep(600)
""")


def start_runner(task_path, base_tag) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(task_path), base_tag], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())
    container_id = proc.stdout.readline().strip()
    assert container_id, "the runner subprocess did not start a trial"
    return proc, container_id


def exists(client, container_id) -> bool:
    return bool(client.containers.list(all=True, filters={"id": container_id}))


def owned_by(client, owner: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{reaper.OWNER_LABEL}={owner}"})


def test_owner_identity_tells_dead_from_alive():
    assert reaper.owner_alive(reaper.owner_id())
    proc = subprocess.Popen(["sleep", "30"])
    owner = reaper.owner_id(proc.pid)
    assert reaper.owner_alive(owner)
    proc.kill()
    proc.wait()
    assert not reaper.owner_alive(owner)
    host, pid, start = reaper.owner_id().rsplit(":", 2)
    assert not reaper.owner_alive(f"{host}:{pid}:{int(start) + 1}")  # a recycled pid is not the owner


def test_next_start_removes_containers_of_a_killed_runner_only(make_task, base_image, docker_client):
    task = make_task("reaped")
    dead, dead_id = start_runner(task.path, base_image.tag)
    live, live_id = start_runner(task.path, base_image.tag)
    try:
        dead_owner = reaper.owner_id(dead.pid)
        deadline = time.monotonic() + 60
        while len(owned_by(docker_client, dead_owner)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the prestarted one comes up in the background
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert exists(docker_client, dead_id)  # SIGKILL left it behind
        assert len(owned_by(docker_client, dead_owner)) == 2  # and the one started ahead, labelled alike
        Sandbox(SandboxConfig(base_image=base_image.tag), client=docker_client)  # the reaper runs at start
        assert not exists(docker_client, dead_id)
        assert not owned_by(docker_client, dead_owner)
        assert exists(docker_client, live_id)  # its owner is alive: not ours to remove
    finally:
        live.kill()
        live.wait()
        reaper.reap(docker_client)
    assert not exists(docker_client, live_id)
