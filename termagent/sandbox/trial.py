"""One live container for one trial: exec with a timeout and bounded output, copy files in.

An agent (oracle, nop, the Terminus loop) drives the container only through `Trial`; the runner
creates it, and the verifier runs through the same `exec` after the agent phase.
"""

from __future__ import annotations

import io
import os
import secrets
import shlex
import socket
import struct
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import docker

from termagent.sandbox.task_image import TaskImage
from termagent.tasks.model import Task
from termagent.terminal import TrialExpired
from termagent.truncate import BoundedOutput

# Between `timeout`'s TERM and its KILL, and before we stop reading a stream that an escaped
# background process keeps open.
KILL_GRACE_SEC = 2.0
READ_GRACE_SEC = 5.0


@dataclass
class ExecResult:
    rc: int | None  # None: still running when we stopped reading (a process escaped the timeout)
    output: str  # stdout and stderr interleaved as written, truncated to head + tail
    truncated: bool
    timed_out: bool
    duration_s: float
    oom_killed: bool = False  # killed by the kernel's OOM killer at the container's memory limit

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


class Trial:
    """A running container for one (task, attempt). Created and removed by `Sandbox.trial`."""

    def __init__(self, client: docker.DockerClient, container, task: Task, *, attempt: int, agent_name: str,
                 image: TaskImage, output_limit_bytes: int):
        self.client = client
        self.container = container
        self.task = task
        self.attempt = attempt
        self.agent_name = agent_name
        self.image = image
        self.output_limit_bytes = output_limit_bytes
        # Monotonic time the agent phase must end by; the runner resets it when the agent starts.
        self.deadline = time.monotonic() + task.agent_timeout_sec
        self.timings: dict[str, float] = {}
        self.oom_killed = False
        self.expired = False  # set by kill() at the agent timeout
        self._oom_kills_seen = 0
        self._agent_phase = True
        self._agent_log = BoundedOutput(output_limit_bytes)
        self.pythons = None  # VerifierPythons (set by the Sandbox): interpreters for the verifier only
        self.verifier_pythons: dict | None = None  # what they provided to this trial's verifier

    @property
    def container_id(self) -> str:
        return self.container.id

    @property
    def remaining(self) -> float:
        """Seconds left in the agent phase (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    # ---- exec -------------------------------------------------------------------------------------

    def exec(self, cmd: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None,
             files: list[tuple[str | os.PathLike, str]] | None = None) -> ExecResult:
        """Run `cmd` (a bash command line, or an argv list) in the container and wait for it.

        With a timeout the command runs under coreutils `timeout` in its own process group: TERM to the
        whole group at the timeout, KILL 2 s later, so background children die with it.
        `files`, (local path, absolute container path) pairs, are copied in by the same exec just before
        `cmd` runs (a tar on its stdin): one engine round trip instead of two (`put_files` + `exec`)."""
        if self.expired:  # the container was killed at the agent timeout (and may be removed by now)
            raise TrialExpired(f"trial {self.task.id}: exec after the agent timeout killed the container")
        try:
            if files:
                result = self._exec_with_files(cmd, files, timeout=timeout, workdir=workdir, env=env, user=user)
            else:
                result = self._exec(_argv(cmd), timeout=timeout, workdir=workdir, env=env, user=user)
        except docker.errors.APIError as e:
            if self.expired:  # killed while this exec ran: the engine's 404/409 is the timeout, not a failure
                raise TrialExpired(f"trial {self.task.id}: the agent timeout killed the container ({e})") from e
            raise
        if self._agent_phase:
            self._agent_log.write(f"$ {cmd if isinstance(cmd, str) else shlex.join(cmd)}\n".encode())
            self._agent_log.write(result.output.encode())
        return result

    def _exec_with_files(self, cmd, files, **kw) -> ExecResult:
        # `cmd`'s argv travels as the wrapper's arguments: no quoting, and it runs exactly as without files.
        failed = f"__termagent_untar_failed_{secrets.token_hex(6)}"
        wrapper = f'tar -x -f - -C / || {{ echo {failed}; exit 1; }}; exec "$@"'
        result = self._exec(["bash", "-c", wrapper, "termagent-files", *_argv(cmd)], stdin=self.archive(files),
                            **kw)
        if failed in result.output:  # no (working) tar in this image: copy through the engine instead
            self.put_files(files)
            result = self._exec(_argv(cmd), **kw)
        return result

    def _exec(self, argv: list[str], *, timeout: float | None, workdir: str | None, env: dict[str, str] | None,
              user: str | None, stdin: bytes | None = None) -> ExecResult:
        # One pipe for stdout and stderr: the engine forwards the two streams each on its own, so read apart a
        # last stderr line could arrive after stdout written later (the verifier's trailer). `sh` execs the
        # command in its place, so the process tree (and the timeout's process group) is unchanged.
        argv = ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv]
        if timeout is not None:
            argv = ["timeout", "-k", f"{KILL_GRACE_SEC:g}", f"{max(timeout, 0.01):.3f}", *argv]
        api = self.client.api
        start = time.monotonic()
        exec_id = api.exec_create(self.container.id, argv, stdout=True, stderr=True, stdin=stdin is not None,
                                  tty=False, environment=env, workdir=workdir, user=user or "")["Id"]
        out = BoundedOutput(self.output_limit_bytes)
        read_deadline = None if timeout is None else start + timeout + KILL_GRACE_SEC + READ_GRACE_SEC
        stream_open = _read_exec_stream(api.exec_start(exec_id, socket=True), out, read_deadline, stdin)
        duration = time.monotonic() - start
        info = api.exec_inspect(exec_id)
        rc = None if info.get("Running") else info.get("ExitCode")
        timed_out = not stream_open or (timeout is not None and duration >= timeout and rc in (124, 137))
        oom = rc == 137 and not timed_out and self._new_oom_kill()
        return ExecResult(rc=rc, output=out.text(), truncated=out.truncated, timed_out=timed_out,
                          duration_s=duration, oom_killed=oom)

    def _new_oom_kill(self) -> bool:
        """Did the kernel OOM-kill a process since we last looked? (cgroup v1 oom_control, v2 events)"""
        probe = ("cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
                 " | awk '$1==\"oom_kill\"{print $2; exit}'")
        text = self._exec(["sh", "-c", probe], timeout=10, workdir=None, env=None, user=None).output.strip()
        count = int(text) if text.isdigit() else None
        if count is None:  # no readable counter: fall back to the engine's flag
            self.container.reload()
            killed = bool(self.container.attrs["State"].get("OOMKilled"))
        else:
            killed, self._oom_kills_seen = count > self._oom_kills_seen, count
        self.oom_killed |= killed
        return killed

    # ---- files ------------------------------------------------------------------------------------

    def copy_in(self, local_path: str | os.PathLike, container_dir: str, *, name: str | None = None) -> str:
        """Copy a local file or directory into `container_dir` (absolute, created if missing) as `name`
        (default: its own name), owned by root, like `docker cp`. Returns the path in the container."""
        local_path = Path(local_path)
        if not container_dir.startswith("/"):
            raise ValueError(f"container_dir must be absolute, got {container_dir!r}")
        target = f"{container_dir.rstrip('/')}/{name or local_path.name}"
        self.put_files([(local_path, target)])
        return target

    def put_files(self, items: list[tuple[str | os.PathLike, str]]) -> None:
        """Copy several (local path, absolute container path) pairs in one archive round trip."""
        # Extracted at / with full paths: the engine creates missing parents (0755) without touching
        # existing ones, so no extra `mkdir -p` round trip.
        if not self.container.put_archive("/", self.archive(items)):
            raise OSError(f"could not copy {[str(p) for p, _ in items]} into the container")

    @staticmethod
    def archive(items: list[tuple[str | os.PathLike, str]]) -> bytes:
        """A tar of (local path, absolute container path) pairs, root-owned, to extract at /."""
        for _, target in items:
            if not str(target).startswith("/"):
                raise ValueError(f"container paths must be absolute, got {target!r}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for local_path, target in items:
                tar.add(str(local_path), arcname=str(target).lstrip("/"), filter=_root_owned)
        return buf.getvalue()

    def read_file(self, path: str) -> bytes | None:
        """Bytes of a file in the container, or None when it does not exist."""
        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            f = tar.extractfile(member) if member is not None else None
            return f.read() if f else None

    def kill(self) -> None:
        """Kill every process in the container (used on the agent timeout); no exec works after it: `exec`
        raises TrialExpired from now on, so an agent still running ends its episode instead of calling a
        container that is being removed."""
        self.expired = True
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass  # already stopped

    # ---- phases -----------------------------------------------------------------------------------

    def start_agent_phase(self, timeout_sec: float | None = None) -> None:
        self._agent_phase = True
        self.deadline = time.monotonic() + (timeout_sec or self.task.agent_timeout_sec)

    def end_agent_phase(self) -> None:
        self._agent_phase = False

    @property
    def agent_output(self) -> str:
        return self._agent_log.text()

    def verify(self):
        """Run the task's tests (after the agent phase only) and return a `VerifierResult`."""
        from termagent.sandbox.verifier import run_verifier

        self.end_agent_phase()
        return run_verifier(self)


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _argv(cmd: str | list[str]) -> list[str]:
    return ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)


def _stream_reader(sock):
    """What to read an exec stream from: the hijacked HTTP response's buffered reader when there is one.

    The docker SDK hands back the socket under the response (`response.raw._fp.fp.raw`), but http.client
    parsed the response headers through a buffered reader over that socket, and one read there can take the
    stream's first frames along with the headers: whenever the command's output was already in the socket
    when the client got round to reading the headers (a short command, a client thread slowed by a busy CPU),
    a read from the bare socket never sees it (empty output with exit 0, or an output without its head). Run
    13 lost 59 episodes' terminals this way (`TerminalError: tmux capture failed 3 times (last exit 0)`,
    `could not start tmux (exit 0)`) and retried 746 captures. Reading through the buffer returns those bytes
    first, then reads the socket (`read1`: at most one recv per call)."""
    reader = getattr(getattr(getattr(getattr(sock, "_response", None), "raw", None), "_fp", None), "fp", None)
    if reader is not None and hasattr(reader, "read1"):
        return reader.read1
    raw = getattr(sock, "_sock", sock)
    return raw.recv


def _read_exec_stream(sock, out: BoundedOutput, deadline: float | None, stdin: bytes | None = None) -> bool:
    """Demultiplex a non-tty exec stream (8-byte frame headers) into `out` until EOF, after sending
    `stdin` (then end-of-file) from a helper thread, so a command that writes before it reads cannot
    deadlock us. Returns False when `deadline` passed first (the stream is then abandoned)."""
    raw = getattr(sock, "_sock", sock)
    read = _stream_reader(sock)
    buf = b""
    if stdin is not None:
        threading.Thread(target=_send_stdin, args=(raw, stdin), name="exec-stdin", daemon=True).start()
    try:
        while True:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                raw.settimeout(left)
            else:
                raw.settimeout(None)
            try:
                chunk = read(65536)
            except TimeoutError:
                return False
            if not chunk:
                return True
            buf += chunk
            while len(buf) >= 8:
                (size,) = struct.unpack(">I", buf[4:8])
                if len(buf) < 8 + size:
                    break
                out.write(buf[8: 8 + size])
                buf = buf[8 + size:]
    finally:
        try:
            sock.close()
        except OSError:
            pass


def _send_stdin(raw, data: bytes) -> None:
    try:
        raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)  # end-of-file for the command (the engine half-closes its stdin)
    except OSError:
        pass  # the command exited without reading it all (or timed out): its output says what happened
