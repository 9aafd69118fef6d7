"""Taking work off a trial's path without weakening it: files copied in by the exec that uses them,
containers started ahead of their trial (one fresh container per trial, labelled as its own), removals
in the background that run_trials and close() still wait for."""

from __future__ import annotations

import pytest

from termagent.sandbox import Sandbox, SandboxConfig, reaper, run_trials

pytestmark = pytest.mark.docker


def our_containers(client) -> list:
    return client.containers.list(all=True, filters={"label": f"{reaper.OWNER_LABEL}={reaper.owner_id()}"})


def test_exec_copies_files_in_before_the_command_even_without_tar(sandbox, make_task, tmp_path):
    (tmp_path / "payload").mkdir()
    (tmp_path / "payload" / "data.txt").write_text("hello\n")
    (tmp_path / "payload" / "run.sh").write_text("echo ran")
    (tmp_path / "payload" / "run.sh").chmod(0o755)
    with sandbox.trial(make_task("exec-files")) as trial:
        first = trial.exec("cat /opt/p/data.txt && /opt/p/run.sh && stat -c '%U %a' /opt/p/run.sh", timeout=30,
                           files=[(tmp_path / "payload", "/opt/p")])
        argv = trial.exec(["cat", "/srv/one.txt"], timeout=30, files=[(tmp_path / "payload" / "data.txt",
                                                                        "/srv/one.txt")])
        # An image without a working tar: the files go through the engine's archive API instead.
        trial.exec("mv /usr/bin/tar /usr/bin/tar.off", timeout=30)
        fallback = trial.exec("cat /tmp/deep/er/data.txt", timeout=30,
                              files=[(tmp_path / "payload" / "data.txt", "/tmp/deep/er/data.txt")])
    assert first.ok and first.output == "hello\nran\nroot 755\n"
    assert argv.ok and argv.output == "hello\n"
    assert fallback.ok and fallback.output == "hello\n"
    assert "__termagent_untar_failed" not in trial.agent_output


class LabelRecorder:
    """Records the container each trial got, with the labels the engine holds for it."""

    def __init__(self, name: str):
        self.name = name

    def run(self, trial, task):
        trial.container.reload()
        marker = trial.exec("ls /used-before 2>/dev/null; touch /used-before", timeout=10)
        return {"id": trial.container_id, "labels": trial.container.labels, "reused": bool(marker.output.strip())}


def test_prestarted_containers_are_fresh_labelled_per_trial_and_all_removed(base_image, docker_client, make_task):
    tasks = [make_task(f"warm-{i}", tests={"test_outputs.py": "def test_ok():\n    pass\n"}) for i in range(3)]
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2, warm_pool=2, reap_on_start=False),
                      client=docker_client)
    specs = [(task, LabelRecorder(agent), attempt) for task in tasks for agent in ("a", "b") for attempt in (0, 1)]
    results = run_trials(sandbox, specs, progress=False)
    assert all(r.error is None and r.reward == 1.0 for r in results), [r.error for r in results]
    records = [r.agent_result for r in results]
    assert len({rec["id"] for rec in records}) == len(specs)  # one fresh container per trial
    assert not any(rec["reused"] for rec in records)
    for (task, agent, attempt), rec in zip(specs, records):
        assert rec["labels"][reaper.OWNER_LABEL] == reaper.owner_id()
        assert (rec["labels"]["termagent.task"], rec["labels"]["termagent.agent"],
                rec["labels"]["termagent.attempt"]) == (task.id, agent.name, str(attempt))
    assert sandbox.stats["prestart_hits"] >= len(specs) - 2 - 2  # all but the first wave (and a straggler)
    assert all("remove_engine" in r.timings for r in results)  # every removal finished before the return
    assert not our_containers(docker_client)


def test_close_removes_containers_started_for_trials_that_never_ran(base_image, docker_client, make_task):
    task = make_task("never-run")
    with Sandbox(SandboxConfig(base_image=base_image.tag, warm_pool=2, reap_on_start=False),
                 client=docker_client) as sandbox:
        sandbox.expect([(task, "ghost", 0), (task, "ghost", 1), (task, "ghost", 2)])
        with sandbox.trial(task, agent_name="ghost", attempt=0, remove_in_background=True):
            pass
        assert sandbox.stats["prestart_hits"] == 1
    assert not our_containers(docker_client)
