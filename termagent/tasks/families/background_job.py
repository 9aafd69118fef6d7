"""process_mgmt: background processes (easy: start a worker, record its PID; medium: with an argument
and a log file; hard: start two, record both PIDs in a file, check them with ps)."""

from __future__ import annotations

from termagent.tasks.families.base import WORDS, Instance, name

NAME, CATEGORY, TAGS = "background-job", "process_mgmt", ["process_mgmt", "nohup", "pid"]

WORKER = "#!/bin/bash\n# {what}: runs until killed\nwhile true; do\n  echo \"{tag} ${{1:-idle}}\" >> {log}\n  sleep 1\ndone\n"

TESTS = '''
import time


def alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_workers_running():
    pids = [int(x) for x in Path(PIDFILE).read_text().split()]
    assert len(pids) == len(SCRIPTS), f"expected {len(SCRIPTS)} PID(s) in {PIDFILE}"
    for pid, script in zip(pids, SCRIPTS):
        assert alive(pid), f"process {pid} is not running"
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\\0", b" ").decode()
        assert script in cmdline, f"process {pid} is not {script}: {cmdline!r}"


def test_working():
    size = Path(LOG).stat().st_size if Path(LOG).exists() else 0
    time.sleep(2.2)
    text = Path(LOG).read_text()
    assert len(text.encode()) > size, f"{LOG} does not grow: the worker is not running"
    assert LINE in text.splitlines(), f"{LOG} has no line {LINE!r}"
'''


def build(rng, difficulty):
    tag, what = rng.choice(WORDS), rng.choice(("poller", "collector", "heartbeat", "syncer"))
    s, pidfile, log = f"{name(rng)}.sh", f"{name(rng)}.pid", f"/app/{name(rng)}.log"
    files = {s: WORKER.format(what=what, tag=tag, log=log)}
    consts = {"PIDFILE": f"/app/{pidfile}", "SCRIPTS": [f"/app/{s}"], "LOG": log, "LINE": f"{tag} idle"}
    if difficulty == "easy":
        instruction = (f"Start the worker `/app/{s}` in the background (it runs until killed) and write its PID to "
                       f"`/app/{pidfile}`.")
        solve = [f"nohup bash /app/{s} > /dev/null 2>&1 & echo $! > /app/{pidfile}"]
        return Instance(instruction, files, solve, TESTS, consts,
                        shape="nohup bash SCRIPT > /dev/null 2>&1 & echo $! > PIDFILE")
    arg = f"{rng.choice(WORDS)}{rng.randint(1, 9)}"
    consts["LINE"] = f"{tag} {arg}"
    if difficulty == "medium":
        instruction = (f"Start the worker `/app/{s}` in the background with the argument `{arg}` (it runs until "
                       f"killed) and write its PID to `/app/{pidfile}`.")
        solve = [f"nohup bash /app/{s} {arg} > /dev/null 2>&1 & echo $! > /app/{pidfile}", "sleep 1", f"tail -2 {log}"]
        return Instance(instruction, files, solve, TESTS, consts)
    s2 = f"{name(rng)}.sh"
    while s2 == s:
        s2 = f"{name(rng)}.sh"
    log2 = f"/app/{name(rng)}.log"
    files[s2] = WORKER.format(what="helper", tag=rng.choice(WORDS), log=log2)
    consts["SCRIPTS"] = [f"/app/{s}", f"/app/{s2}"]
    instruction = (f"Start the workers `/app/{s}` (with the argument `{arg}`) and `/app/{s2}` in the background "
                   f"(they run until killed). Write their PIDs, in that order, one per line, to `/app/{pidfile}`, "
                   "and check that both are running.")
    solve = [f"nohup bash /app/{s} {arg} > /dev/null 2>&1 & echo $! > /app/{pidfile}",
             f"nohup bash /app/{s2} > /dev/null 2>&1 & echo $! >> /app/{pidfile}",
             f"ps -p $(paste -sd, /app/{pidfile}) -o pid,args"]
    return Instance(instruction, files, solve, TESTS, consts)
