"""Task images: the task's Dockerfile (or docker_image), with public base images swapped for the local
base image through an alias table when they cannot or should not be pulled.

Policies (sandbox.image_policy):
  alias-first  a FROM image matching an alias pattern is replaced (reproducible offline; the default)
  pull-first   use the image when present or pullable; replace only when it is neither
  never        never replace (builds fail offline when the image is missing)
Alias targets: "base" (the base image as it is), an image name, or a flavour of termagent.sandbox.offline
("debian", "python", "tbench": the base or another Debian root plus pip / the host's trust / uv / the
aliased image's WORKDIR). A task with both [environment].docker_image and a Dockerfile uses the prebuilt
image when it is present (or, pull-first, pullable), else builds the Dockerfile; either way it is recorded.
Built images are cached by (task content hash, base image id, resolved Dockerfile).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import re
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import docker

from termagent.sandbox.errors import BuildError
from termagent.sandbox.offline import FlavourBuilder, OfflineConfig, uv_requested
from termagent.sandbox.pythons import VerifierPythons
from termagent.tasks.model import Task

log = logging.getLogger(__name__)

POLICIES = ("alias-first", "pull-first", "never")
FLAVOURS = ("debian", "python", "tbench")  # alias targets built by termagent.sandbox.offline
TASK_IMAGE_REPO = "termagent-task"
# How build_context makes the archive; part of the image key, so an image built from another archive is rebuilt
# ("unprotected": a file's write bit that a DVC link took away is put back, unprotected_mode).
CONTEXT_FORMAT = "unprotected"

# FROM [--platform=...] image [AS name]
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class TaskImage:
    tag: str
    id: str
    substituted_from: str | None  # the public image the task named, when it was replaced
    substituted_to: str | None
    build_s: float
    cached: bool
    # Every offline substitution made for this image, one dict each (see substitution records in
    # termagent.sandbox.offline): {"what": "alias" | "prebuilt_image_replaced", ...}
    substitutions: tuple[dict, ...] = ()

    def to_dict(self) -> dict:
        return {"tag": self.tag, "id": self.id, "substituted_from": self.substituted_from,
                "substituted_to": self.substituted_to, "cached": self.cached,
                "substitutions": [dict(s) for s in self.substitutions]}


class ImageResolver:
    """Decides which image a task's FROM (or docker_image) really uses, and builds task images."""

    def __init__(self, client: docker.DockerClient, base_image: str, policy: str = "alias-first",
                 aliases: dict[str, str] | None = None, offline: OfflineConfig | None = None):
        if policy not in POLICIES:
            raise ValueError(f"sandbox.image_policy must be one of {POLICIES}, got {policy!r}")
        self.client = client
        self.base_image = base_image
        self.policy = policy
        self.aliases = dict(aliases or {})
        self._pullable: dict[str, bool] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.flavours = FlavourBuilder(client, base_image, offline)
        # Interpreters a verifier asks uv for that the image lacks (put in after the agent phase).
        self.pythons = VerifierPythons(client, self.flavours, self.flavours.config)
        self._records: dict[str, dict] = {}  # resolved tag -> its flavour record

    # ---- which image --------------------------------------------------------------------------------

    def alias_target(self, name: str) -> str | None:
        """The alias table's target for `name`: an image name, "base", or a flavour kind."""
        for pattern, target in self.aliases.items():
            if fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(f"docker.io/library/{name}", pattern):
                return self.base_image if target == "base" else target
        return None

    def resolve(self, name: str) -> str:
        """The image to use for `name` under the policy (== name when no substitution). A flavour target
        is built here (cached by its recipe hash); its record is kept for `substitution_record`."""
        target = self.alias_target(name)
        if self.policy == "never" or target is None or target == name:
            return name
        if self.policy == "pull-first" and self._present_or_pullable(name):
            return name
        if target in FLAVOURS:
            kind = "base" if target == "debian" else target
            tag, record = self.flavours.ensure(kind, name)
            if target == "debian":
                record["kind"] = "debian"
            self._records[name] = record
            return tag
        return target

    def alias_record(self, name: str) -> dict:
        """What resolving `name` recorded about its stand-in (e.g. its conventional workdir); {} if none."""
        return dict(self._records.get(name, {}))

    def substitution_record(self, name: str, resolved: str) -> dict:
        record = {"what": "alias", "from": name, "to": resolved, "policy": self.policy}
        if name in self._records:
            record.update(self._records[name])
        return record

    def _present_or_pullable(self, name: str) -> bool:
        if name not in self._pullable:
            try:
                self.client.images.get(name)
                self._pullable[name] = True
            except docker.errors.ImageNotFound:
                try:
                    self.client.images.pull(name)
                    self._pullable[name] = True
                except docker.errors.APIError as e:  # offline: fails at once (no such host)
                    log.info("cannot pull %s (%s)", name, str(e).splitlines()[0][:200])
                    self._pullable[name] = False
        return self._pullable[name]

    def rewrite_dockerfile(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """The Dockerfile with each FROM image resolved; returns (text, [(from, to), ...])."""
        stages: set[str] = set()
        substitutions = []
        lines = []
        for line in text.splitlines(keepends=True):
            m = _FROM.match(line)
            if m:
                head, name, rest = m.groups()
                as_match = re.search(r"\s+AS\s+(\S+)", rest, re.IGNORECASE)
                if name.lower() not in stages and "$" not in name:  # not an earlier stage, not an ARG
                    resolved = self.resolve(name)
                    if resolved != name:
                        substitutions.append((name, resolved))
                        ending = line[len(line.rstrip("\r\n")):] or "\n"
                        line = f"{head}{resolved}{rest}{ending}"
                        workdir = self._records.get(name, {}).get("workdir")
                        if workdir:  # the aliased image's WORKDIR, before the task's own instructions
                            line += f"WORKDIR {workdir}{ending}"
                if as_match:
                    stages.add(as_match.group(1).lower())
            lines.append(line)
        return "".join(lines), substitutions

    # ---- building -----------------------------------------------------------------------------------

    def prepare(self, task: Task) -> TaskImage:
        """The task's image: built (or found in the cache), with substitutions applied and logged."""
        env = task.environment
        start = time.monotonic()
        notes: list[dict] = []
        if env.dockerfile is not None and env.docker_image:
            prebuilt = self._prebuilt(env.docker_image)
            if prebuilt is not None:
                return TaskImage(tag=env.docker_image, id=prebuilt.id, substituted_from=None, substituted_to=None,
                                 build_s=time.monotonic() - start, cached=True)
            reason = ("neither present nor pullable" if self.policy == "pull-first"
                      else f"not present locally (image_policy {self.policy}: not pulled)")
            log.info("task %s: prebuilt image %s %s: building its Dockerfile", task.id, env.docker_image, reason)
            notes.append({"what": "prebuilt_image_replaced", "docker_image": env.docker_image,
                          "built_from": _relative(env.dockerfile, task.path), "reason": reason})
        if env.dockerfile is None:
            name = env.docker_image or self.base_image
            resolved = self.resolve(name)
            if resolved != name:
                log.info("task %s: image %s -> %s (%s)", task.id, name, resolved, self.policy)
                notes.append(self.substitution_record(name, resolved))
            try:
                image = self.client.images.get(resolved)
            except docker.errors.ImageNotFound:
                if not self._present_or_pullable(resolved):
                    raise BuildError(f"task {task.id}: image {resolved!r} is neither present nor pullable "
                                     "and matches no alias in sandbox.image_aliases") from None
                image = self.client.images.get(resolved)
            return TaskImage(tag=resolved, id=image.id, substituted_from=name if resolved != name else None,
                             substituted_to=resolved if resolved != name else None,
                             build_s=time.monotonic() - start, cached=True,
                             substitutions=tuple(self.task_records(task, notes)))

        try:
            original = env.dockerfile.read_text()
        except OSError as e:
            raise BuildError(f"task {task.id}: cannot read {env.dockerfile}: {e}") from None
        dockerfile, substitutions = self.rewrite_dockerfile(original)
        base_ids = [self._image_id(to) for _, to in substitutions]
        key = hashlib.sha256("\0".join([CONTEXT_FORMAT, task.content_hash, dockerfile, *base_ids]).encode()).hexdigest()
        tag = f"{TASK_IMAGE_REPO}/{_slug(task.id)}:{key[:12]}"
        sub_from = ", ".join(f for f, _ in substitutions) or None
        sub_to = ", ".join(t for _, t in substitutions) or None
        for frm, to in substitutions:
            log.info("task %s: FROM %s -> %s (%s)", task.id, frm, to, self.policy)
            notes.append(self.substitution_record(frm, to))
        notes = self.task_records(task, notes)

        with self._lock(tag):
            try:
                image = self.client.images.get(tag)
                return TaskImage(tag=tag, id=image.id, substituted_from=sub_from, substituted_to=sub_to,
                                 build_s=time.monotonic() - start, cached=True, substitutions=tuple(notes))
            except docker.errors.ImageNotFound:
                pass
            self._build(task, dockerfile, tag)
            image = self.client.images.get(tag)
        return TaskImage(tag=tag, id=image.id, substituted_from=sub_from, substituted_to=sub_to,
                         build_s=time.monotonic() - start, cached=False, substitutions=tuple(notes))

    def _prebuilt(self, name: str):
        """The task's prebuilt image when it is present (or, pull-first, pullable); None otherwise."""
        try:
            return self.client.images.get(name)
        except docker.errors.ImageNotFound:
            if self.policy == "pull-first" and self._present_or_pullable(name):
                return self.client.images.get(name)
        except docker.errors.APIError:
            pass
        return None

    def task_records(self, task: Task, notes: list[dict]) -> list[dict]:
        """Adds the uv versions the task's scripts ask for to the flavour records that provide uv."""
        flavoured = [n for n in notes if n.get("uv")]
        if flavoured:
            texts = []
            for path in [*_scripts(task.tests_dir), *task.extra_test_files.values(), task.solve_script]:
                if path is None:
                    continue
                try:
                    texts.append(path.read_text(errors="replace"))
                except OSError:
                    pass
            asked = uv_requested(*texts)
            for note in flavoured:
                note["uv"] = {**note["uv"], "requested_by_task": asked}
        return notes

    def _build(self, task: Task, dockerfile: str, tag: str) -> None:
        env = task.environment
        context = env.context_dir or env.dockerfile.parent
        # The rewritten Dockerfile lives outside the context: the SDK adds it to the build archive
        # under a private name, so the task directory is never modified.
        fd, path = tempfile.mkstemp(prefix="termagent-", suffix=".Dockerfile")
        with os.fdopen(fd, "w") as f:
            f.write(dockerfile)
        # A client of its own: closing it is how a build that overruns its timeout gets cancelled.
        api = docker.from_env(timeout=max(int(env.build_timeout_sec), 1)).api
        log_lines: list[str] = []
        failure: list[str] = []

        def consume() -> None:
            try:
                archive, name = build_context(context, path)
                for chunk in api.build(fileobj=archive, custom_context=True, dockerfile=name, tag=tag, rm=True,
                                       forcerm=True, decode=True,
                                       labels={"termagent": "1", "termagent.task": task.id}):
                    if "stream" in chunk:
                        log_lines.append(chunk["stream"])
                    if "error" in chunk:
                        failure.append(chunk["error"])
                    del log_lines[:-200]
            except Exception as e:  # noqa: BLE001 (reported below as a BuildError with the log tail)
                failure.append(f"{type(e).__name__}: {e}")

        try:
            builder = threading.Thread(target=consume, name=f"build-{task.id}", daemon=True)
            builder.start()
            builder.join(env.build_timeout_sec)
            if builder.is_alive():
                api.close()  # the engine cancels a build whose client went away
                failure.append(f"build timed out after {env.build_timeout_sec:g} s (build_timeout_sec)")
        finally:
            os.unlink(path)
        if failure:
            tail = "".join(log_lines)[-3000:]
            raise BuildError(f"task {task.id}: building its image failed: {failure[-1].strip()}\n"
                             f"--- build log tail ---\n{tail}")

    def _image_id(self, name: str) -> str:
        try:
            return self.client.images.get(name).id
        except docker.errors.ImageNotFound:
            return name  # a pullable image: its name stands in for the id

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())


def _scripts(tests_dir):
    if tests_dir is None or not tests_dir.is_dir():
        return []
    return sorted(p for p in tests_dir.iterdir() if p.is_file() and p.suffix == ".sh")


def _relative(path, root) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _slug(task_id: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()).strip(".-_")
    return slug[:100] or "task"


def unprotected_mode(mode: int, is_dir: bool) -> int:
    """A task file's mode with the owner's write bit that a DVC link took away put back: DVC versions a task tree
    (data/generated) as read-only links into its cache (0444), and copied as they are, a task's inputs would reach
    the container read-only where the task's author wrote 0644 (chmod-mode's verifier checks "the other files
    keep 0644": 15 of its 16 oracle demos failed in a fresh clone). A file with any write bit, and every
    directory, keeps its mode (a task may ship a 0600 key or a 0700 directory)."""
    mode &= 0o7777
    return mode if is_dir or mode & 0o222 else mode | 0o200


def build_context(context: str | os.PathLike, dockerfile: str) -> tuple[tempfile.SpooledTemporaryFile, str]:
    """The build archive of `context` (its .dockerignore applied, `dockerfile` added under a private name, as
    docker-py's own `build(path=...)` makes it) with each file's mode through `unprotected_mode`. Returns
    (archive, dockerfile name)."""
    from docker.utils import tar
    from docker.api.build import process_dockerfile  # what build(path=...) calls

    context = str(context)
    exclude = None
    ignore = Path(context) / ".dockerignore"
    if ignore.is_file():
        exclude = [line.strip() for line in ignore.read_text().splitlines()
                   if line.strip() and not line.strip().startswith("#")]
    name, contents = process_dockerfile(dockerfile, context)
    raw = tar(context, exclude=exclude, dockerfile=(name, contents))
    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=raw) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for info in src:
            if info.isreg() or info.isdir():
                info.mode = unprotected_mode(info.mode, info.isdir())
            dst.addfile(info, src.extractfile(info) if info.isreg() else None)
    raw.close()
    out.seek(0)
    return out, name
