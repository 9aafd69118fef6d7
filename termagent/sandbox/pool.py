"""The container pool: task images -> one fresh container per trial, at most `concurrency` at once.

    sandbox = Sandbox(SandboxConfig(base_image=...))
    with sandbox.trial(task, attempt=0, agent_name="terminus") as trial:    # a live container
        trial.exec("ls -la", timeout=10)
        verdict = trial.verify()

Per-trial overhead is kept off the trial's path: the containers of the trials announced next
(`expect`, `warm_pool`, one fresh container per trial, never reused) are started ahead, and finished
ones are removed on background threads (`drain()` waits for them). What a trial *does* (agent phase,
verifier, result) is in termagent/sandbox/lifecycle.py.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from typing import Self

import docker

from termagent.sandbox import placement, reaper
from termagent.sandbox.offline import OfflineConfig
from termagent.sandbox.task_image import ImageResolver, TaskImage
from termagent.sandbox.trial import Trial
from termagent.tasks.model import Task

log = logging.getLogger(__name__)

# Threads removing finished containers in the background.
REMOVER_THREADS = 2


@dataclass
class SandboxConfig:
    base_image: str = "termagent-base:latest"  # what aliased FROM lines are rewritten to
    concurrency: int = 8  # trials (containers in use) at once, across every thread using this Sandbox
    pids_limit: int = 64  # stops fork bombs
    output_limit_bytes: int = 65536  # per exec, and for the agent transcript (head + tail)
    image_policy: str = "alias-first"  # alias-first | pull-first | never (see task_image.py)
    # target: "base" (the base image), an image name, or a flavour of sandbox/offline.py (debian|python|tbench)
    image_aliases: dict[str, str] = field(default_factory=lambda: {
        "ubuntu:*": "debian", "debian:*": "debian", "python:*": "python",
        "ghcr.io/laude-institute/t-bench/*": "tbench"})
    offline: OfflineConfig = field(default_factory=OfflineConfig)  # flavour images: Python, trust, uv
    reap_on_start: bool = True  # remove containers of dead runs when the Sandbox starts
    # Containers created and started ahead of the trials queued in run_trials (or announced with
    # Sandbox.expect), so that start-up overlaps the trials still running. Each is made for exactly one
    # upcoming trial (labelled with its task, agent and attempt) and used by that trial only. 0: off.
    warm_pool: int = 2
    # run_trials removes finished containers on background threads (run_trials still waits for every
    # removal before it returns); Sandbox.trial() alone removes synchronously unless asked to.
    background_remove: bool = True
    # Simple Dockerfiles (FROM + COPY/ADD + WORKDIR/ENV/USER): start the FROM image and place the files
    # at creation instead of building an image per task (termagent/sandbox/placement.py).
    place_files: bool = True
    # run_trials runs trials that ended ungraded (infrastructure failures) again, this many more rounds.
    retries: int = 1


class Sandbox:
    """Builds task images and hands out containers, never more than `config.concurrency` trials at once.

    Containers alive at once: at most `concurrency` in trials, `warm_pool` started ahead of their trial,
    and `concurrency` being removed in the background. Every one carries this process's owner label, so
    the reaper removes them after a crash; `close()` (also run at exit) removes what is left otherwise.
    """

    def __init__(self, config: SandboxConfig | None = None, client: docker.DockerClient | None = None):
        self.config = config or SandboxConfig()
        # One HTTP connection per concurrent exec or API call, plus the background threads' and slack.
        self.client = client or docker.from_env(
            max_pool_size=2 * self.config.concurrency + self.config.warm_pool + REMOVER_THREADS + 4)
        self.images = ImageResolver(self.client, self.config.base_image, self.config.image_policy,
                                    self.config.image_aliases, self.config.offline)
        self.owner = reaper.owner_id()
        self._slots = threading.BoundedSemaphore(self.config.concurrency)
        self._lock = threading.Lock()
        # Prestarted containers by trial key, and the trials announced to come (in order).
        self._warm: dict[tuple, collections.deque[Future]] = {}
        self._upcoming: collections.deque[tuple[tuple, Task]] = collections.deque()
        self._started_unannounced: collections.Counter = collections.Counter()
        self._warm_count = 0
        self._removals: set[Future] = set()
        self._removal_slots = threading.BoundedSemaphore(max(1, self.config.concurrency))
        self._starter: ThreadPoolExecutor | None = None
        self._remover: ThreadPoolExecutor | None = None
        # prestart_hits / prestart_misses (trials that found / did not find a container started for them
        # ahead), removed_in_background
        self.stats: collections.Counter = collections.Counter()
        atexit.register(_close_at_exit, weakref.ref(self))
        if self.config.reap_on_start:
            reaper.reap(self.client)

    def prepare(self, task: Task) -> TaskImage:
        placed = placement.prepare(task, self.images) if self.config.place_files else None
        return placed or self.images.prepare(task)

    @contextlib.contextmanager
    def trial(self, task: Task, *, attempt: int = 0, agent_name: str = "agent",
              image: TaskImage | None = None, remove_in_background: bool = False) -> Iterator[Trial]:
        """A live container for one trial; killed and removed on exit, whatever happens (with
        `remove_in_background`, by a background thread: `drain()` waits for it)."""
        image = image or self.prepare(task)
        with self._slots:
            start = time.monotonic()
            container, engine_s = self._claim_prestarted(_trial_key(task, agent_name, attempt), image)
            if container is None:
                container = self._start_container(task, image, attempt, agent_name)
                engine_s = time.monotonic() - start
            trial = Trial(self.client, container, task, attempt=attempt, agent_name=agent_name, image=image,
                          output_limit_bytes=self.config.output_limit_bytes)
            trial.pythons = self.images.pythons  # for a verifier asking uv for a Python the image lacks
            trial.timings["create"] = time.monotonic() - start  # what this trial waited for
            trial.timings["create_engine"] = engine_s  # what create + start took, ahead of time or not
            self._top_up()
            try:
                yield trial
            finally:
                start = time.monotonic()
                if remove_in_background:
                    self._remove_later(container, trial.timings)
                else:
                    self._remove(container)
                    trial.timings["remove_engine"] = time.monotonic() - start
                trial.timings["remove"] = time.monotonic() - start

    # ---- containers -------------------------------------------------------------------------------

    def _start_container(self, task: Task, image: TaskImage, attempt: int, agent_name: str):
        env = task.environment
        container = self.client.containers.create(image.tag, **placement.create_overrides(image, dict(  # noqa: C408 (the hook wraps the original call)
            command=["sleep", "infinity"], detach=True, init=True,
            labels={reaper.LABEL: "1", reaper.OWNER_LABEL: self.owner, "termagent.task": task.id,
                    "termagent.agent": agent_name, "termagent.attempt": str(attempt)},
            nano_cpus=int(env.cpus * 1e9), mem_limit=f"{env.memory_mb}m", memswap_limit=f"{env.memory_mb}m",
            pids_limit=self.config.pids_limit, network_mode="bridge" if env.network else "none",
            environment=dict(env.env), working_dir=env.workdir or None,
            hostname="sandbox", stop_signal="SIGKILL",
        )))
        try:
            placement.place(container, image)
            container.start()
        except BaseException:
            self._remove(container)  # created but not started: not left behind for the reaper
            raise
        return container

    def _remove(self, container) -> None:
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:  # the reaper retries at the next start
            log.warning("could not remove container %s: %s", container.short_id, e)

    def _remove_later(self, container, timings: dict[str, float]) -> None:
        # Bounded: with `concurrency` removals pending, the next trial to end waits for a free one.
        self._removal_slots.acquire()

        def remove() -> None:
            start = time.monotonic()
            try:
                self._remove(container)
            finally:
                timings["remove_engine"] = time.monotonic() - start
                self._removal_slots.release()

        with self._lock:
            if self._remover is None:
                self._remover = ThreadPoolExecutor(REMOVER_THREADS, thread_name_prefix="sandbox-remove")
            try:
                future = self._remover.submit(remove)
            except RuntimeError:  # interpreter shutting down: no new threads, remove here
                future = None
            else:
                self._removals.add(future)
                future.add_done_callback(self._removal_done)
                self.stats["removed_in_background"] += 1
        if future is None:
            remove()

    def _removal_done(self, future: Future) -> None:
        with self._lock:
            self._removals.discard(future)

    def drain(self) -> None:
        """Wait until every container this Sandbox removes in the background is gone."""
        while True:
            with self._lock:
                pending = list(self._removals)
            if not pending:
                return
            futures_wait(pending)

    # ---- starting containers ahead of their trials ------------------------------------------------

    def expect(self, upcoming: Sequence[tuple[Task, str, int]]) -> None:
        """Announce trials (task, agent name, attempt) that will start soon, in this order: up to
        `config.warm_pool` of them get their container created and started ahead, in the background."""
        if self.config.warm_pool <= 0:
            return
        with self._lock:
            self._upcoming.extend((_trial_key(task, agent_name, attempt), task)
                                  for task, agent_name, attempt in upcoming)
        self._top_up()

    def forget(self, upcoming: Sequence[tuple[Task, str, int]]) -> None:
        """Withdraw announced trials that will not run after all; their prestarted containers are removed
        (in the background: `drain()` waits for them)."""
        keys = collections.Counter(_trial_key(task, agent_name, attempt) for task, agent_name, attempt in upcoming)
        with self._lock:
            self._upcoming = collections.deque(item for item in self._upcoming if not _take(keys, item[0]))
            for key in keys:
                self._started_unannounced.pop(key, None)
            dropped = [f for key in list(self._warm) if key in keys for f in self._pop_warm(key, keys[key])]
        self._discard(dropped, lambda container: self._remove_later(container, {}))

    def _discard(self, prestarts: list[Future], remove) -> None:
        """Remove the containers of prestarts no trial will claim (a failed prestart started nothing)."""
        for future in prestarts:
            try:
                container = future.result()[0]
            except Exception as e:  # noqa: BLE001 (nothing was started)
                log.debug("a prestart that was not needed had failed: %s", e)
                continue
            remove(container)

    def _top_up(self) -> None:
        with self._lock:
            while self._upcoming and self._warm_count < self.config.warm_pool:
                key, task = self._upcoming.popleft()
                if _take(self._started_unannounced, key):
                    continue  # its trial already started without waiting for us
                if self._starter is None:
                    self._starter = ThreadPoolExecutor(max(1, self.config.warm_pool),
                                                       thread_name_prefix="sandbox-prestart")
                try:
                    future = self._starter.submit(self._prestart, key, task)
                except RuntimeError:  # interpreter shutting down
                    return
                self._warm.setdefault(key, collections.deque()).append(future)
                self._warm_count += 1

    def _prestart(self, key: tuple, task: Task):
        start = time.monotonic()
        image = self.prepare(task)
        container = self._start_container(task, image, attempt=key[3], agent_name=key[2])
        return container, image.tag, time.monotonic() - start

    def _claim_prestarted(self, key: tuple, image: TaskImage):
        """(container, create + start seconds) prestarted for this trial, or (None, None)."""
        with self._lock:
            futures = self._pop_warm(key, 1)
            if not futures and any(k == key for k, _ in self._upcoming):
                self._started_unannounced[key] += 1  # don't prestart it later: this trial is starting now
            self.stats["prestart_hits" if futures else "prestart_misses"] += 1
        if not futures:
            return None, None
        try:
            container, tag, engine_s = futures[0].result()
        except Exception as e:  # noqa: BLE001 (the trial starts its own and meets the error there)
            log.info("prestarting a container for %s failed, starting one now: %s", key[0], e)
            return None, None
        if tag != image.tag:  # the caller asked for another image than the task's own
            self._remove_later(container, {})
            return None, None
        return container, engine_s

    def _pop_warm(self, key: tuple, n: int) -> list[Future]:
        queue = self._warm.get(key)
        taken = []
        while queue and len(taken) < n:
            taken.append(queue.popleft())
        if queue is not None and not queue:
            del self._warm[key]
        self._warm_count -= len(taken)
        return taken

    # ---- shutdown ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove prestarted containers no trial claimed and wait for background removals."""
        with self._lock:
            self._upcoming.clear()
            self._started_unannounced.clear()
            leftovers = [f for key in list(self._warm) for f in self._pop_warm(key, len(self._warm[key]))]
        self._discard(leftovers, self._remove)
        self.drain()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()



def _trial_key(task: Task, agent_name: str, attempt: int) -> tuple:
    return (task.id, task.content_hash, agent_name, attempt)


def _take(counter: collections.Counter, key) -> bool:
    """Take one `key` from `counter`; False when it has none."""
    if counter[key] <= 0:
        return False
    counter[key] -= 1
    return True


def _close_at_exit(ref: weakref.ref) -> None:
    # Runs after the interpreter joined the background threads (their queued work is done): what is
    # left is containers prestarted for trials that never ran.
    sandbox = ref()
    if sandbox is not None:
        sandbox.close()


