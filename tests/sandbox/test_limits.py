"""The container limits hold: pids, memory, output size, exec timeouts, network isolation."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker


def test_fork_bomb_is_stopped_by_the_pids_limit(sandbox, make_task, docker_client):
    task = make_task("fork-bomb")
    with sandbox.trial(task) as trial:
        bomb = trial.exec(":(){ :|:& };:", timeout=3)
        pids = trial.container.stats(stream=False)["pids_stats"]
        container_id = trial.container_id
    # The kernel refused forks at the limit (bash reports it), the count never passed it, and the
    # container, bomb and all, was removed at the end of the trial.
    assert "fork: retry: Resource temporarily unavailable" in bomb.output
    assert pids["limit"] == sandbox.config.pids_limit
    assert 0 < pids["current"] <= sandbox.config.pids_limit
    assert not docker_client.containers.list(all=True, filters={"id": container_id})


def test_memory_hog_is_killed_and_reported_out_of_memory(sandbox, make_task):
    task = make_task("memory-hog", memory_mb=64)
    with sandbox.trial(task) as trial:
        hog = trial.exec("python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'", timeout=60)
        after = trial.exec("echo still-here", timeout=10)
    assert hog.rc == 137 and hog.oom_killed and not hog.timed_out
    assert trial.oom_killed
    assert after.output == "still-here\n"  # only the hog died, not the container


def test_endless_output_is_truncated_keeping_head_and_tail(sandbox, make_task):
    task = make_task("endless-output")
    limit = sandbox.config.output_limit_bytes
    with sandbox.trial(task) as trial:
        finite = trial.exec("echo FIRST; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo LAST", timeout=60)
        endless = trial.exec("yes endless", timeout=2)
    assert finite.rc == 0 and finite.truncated
    assert finite.output.startswith("FIRST\nxxx") and finite.output.endswith("xx\nLAST\n")
    assert "bytes in the middle omitted" in finite.output and len(finite.output) < limit + 100
    assert endless.timed_out and endless.truncated and len(endless.output) < limit + 100
    assert endless.output.startswith("endless\n")


def test_hung_command_is_killed_at_its_timeout_with_its_children(sandbox, make_task):
    task = make_task("hung")
    with sandbox.trial(task) as trial:
        hung = trial.exec("sleep 1000 & sleep 999", timeout=1)
        ps = trial.exec("ps -eo args", timeout=10)
        ok = trial.exec("true", timeout=10)
    assert hung.timed_out and hung.rc in (124, 137)
    assert "sleep 1000" not in ps.output and "sleep 999" not in ps.output
    assert ok.ok and not ok.timed_out


def test_no_network_task_sees_only_loopback(sandbox, make_task):
    isolated = make_task("no-net", network="no-network")
    public = make_task("net", network="public")
    with sandbox.trial(isolated) as trial:
        links_isolated = trial.exec("ip -o link show | awk -F': ' '{print $2}'", timeout=10).output.split()
    with sandbox.trial(public) as trial:
        links_public = trial.exec("ip -o link show | awk -F': ' '{print $2}'", timeout=10).output.split()
    assert links_isolated == ["lo"]
    assert len(links_public) > 1  # the contrast: a public task gets an interface besides lo


def test_trial_applies_env_workdir_and_limits(sandbox, make_task):
    task = make_task("env", memory_mb=128, extra_toml='workdir = "/srv/work"\n\n[environment.env]\nGREETING = "hi"\n')
    with sandbox.trial(task) as trial:
        out = trial.exec("mkdir -p /srv/work; echo $GREETING; cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
                         timeout=10, workdir="/").output.split()
        attrs = trial.container.attrs["HostConfig"]
    assert out[0] == "hi" and int(out[1]) == 128 * 1024 * 1024
    assert attrs["NanoCpus"] == 1_000_000_000 and attrs["MemorySwap"] == attrs["Memory"]
    assert trial.container.attrs["Config"]["WorkingDir"] == "/srv/work"
