"""No image build for simple task Dockerfiles: start the FROM image and place the files at creation.

Generated task instances (and several hand-written tasks) have Dockerfiles made only of

    FROM image          (one stage, no ARG)
    WORKDIR /dir        ENV K=V ...        USER name
    COPY src... dest    ADD src... dest    (local sources, no flags; ADD of a local archive is not simple)

A `docker build` of each would cost an image per task (seconds of build and megabytes of layer each).
Instead `plan()` reads such a Dockerfile into a `Placement` (files with their modes, the final workdir,
env and user); the sandbox creates the container from the FROM image (resolved through the alias table
like a build), puts the files in with one `put_archive` before starting it, and passes workdir, env and
user to the create call. The result is the same as the build's: same files and contents, same modes
(a DVC link's read-only bits undone: `unprotected_mode`), root ownership (COPY without --chown), same workdir, env and user (tests/sandbox/test_placement.py runs
both paths on the same task and compares). Anything else returns None and is built as before.

Parent directories that do not exist are created by the engine with mode 0755, owned by root, as the
builder's COPY and WORKDIR do; directories that exist in the image are left as they are (no entries for
them go into the archive), again as a build leaves them.

Where a single file goes follows the builder's rule: into the destination when it ends with "/" (or is
"." / ends in "/.") or is a directory by then, else to that path. "A directory by then" is decided from
the Dockerfile (an earlier WORKDIR or COPY made it) and, for the rest, from the image at placement time
(`COPY tool /usr/local/bin`): `Placement.file_dests` lists those destinations.
"""

from __future__ import annotations

import base64
import glob
import io
import json
import logging
import posixpath
import shlex
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

from termagent.sandbox.task_image import ImageResolver, TaskImage, unprotected_mode
from termagent.tasks.model import Task

log = logging.getLogger(__name__)

_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".gz", ".bz2", ".xz")


@dataclass(frozen=True)
class Placement:
    """What a simple Dockerfile does on top of its FROM image."""

    from_image: str  # as written in the Dockerfile (resolved through the alias table when used)
    entries: tuple[tuple[str, Path | None, int], ...]  # (absolute container path, host file or None: dir, mode)
    workdir: str | None  # the last WORKDIR (None: the image's own)
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    workdirs: tuple[str, ...] = field(default=())  # every WORKDIR: created even when nothing is copied there
    # (destination, file name) of single-file COPYs to a path the Dockerfile did not make a directory: the
    # file goes to destination/name instead when the image has a directory there (as the builder does).
    file_dests: tuple[tuple[str, str], ...] = field(default=())

    def archive(self) -> bytes:
        """The tar put into the container at "/": root-owned entries with their modes (mtime of the source)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, source, mode in self.entries:
                info = tarfile.TarInfo(path.lstrip("/"))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode = mode
                if source is None:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                else:
                    st = source.stat()
                    info.size, info.mtime = st.st_size, int(st.st_mtime)
                    with source.open("rb") as f:
                        tar.addfile(info, f)
        return buf.getvalue()


@dataclass(frozen=True)
class PlacedImage(TaskImage):
    """A TaskImage whose tag is the task's FROM image (no build); the container gets `placement` at creation."""

    placement: Placement | None = None

    def to_dict(self) -> dict:
        return {**super().to_dict(), "placed": True}


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions: comments dropped, backslash continuations joined."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continuation
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _env_pairs(args: str) -> list[tuple[str, str]] | None:
    if "$" in args:
        return None  # variable expansion: leave it to the builder
    words = shlex.split(args)
    if words and "=" not in words[0]:  # legacy `ENV key value with spaces`
        return [(words[0], args.split(None, 1)[1].strip())] if len(words) > 1 else None
    pairs = []
    for word in words:
        if "=" not in word:
            return None
        key, value = word.split("=", 1)
        pairs.append((key, value))
    return pairs


def plan(task: Task, initial_workdir: str | None = None) -> Placement | None:
    """The Placement of the task's Dockerfile, or None when the Dockerfile needs a real build.
    `initial_workdir`: the WORKDIR an aliased FROM image carries by convention (t-bench bases: /app), in
    effect before the task's own instructions, as the build path inserts it after the FROM line."""
    env = task.environment
    if env.dockerfile is None or not env.dockerfile.is_file():
        return None
    context = (env.context_dir or env.dockerfile.parent).resolve()
    if (context / ".dockerignore").exists():
        return None
    try:
        lines = _logical_lines(env.dockerfile.read_text())
    except (OSError, UnicodeDecodeError):
        return None
    from_image, workdir, user = None, initial_workdir or "/", None
    workdirs: list[str] = [initial_workdir] if initial_workdir else []
    env_pairs: dict[str, str] = {}
    entries: dict[str, tuple[Path | None, int]] = {}
    file_dests: dict[str, str] = {}
    for line in lines:
        op, _, args = line.partition(" ")
        op, args = op.upper(), args.strip()
        if op == "FROM":
            words = args.split()
            if from_image is not None or len(words) != 1 or words[0].startswith("--") or "$" in words[0]:
                return None  # multi-stage, platform flags, ARG-dependent
            from_image = words[0]
        elif from_image is None:
            return None  # ARG before FROM, or no FROM
        elif op == "WORKDIR":
            if "$" in args or not args:
                return None
            workdir = posixpath.normpath(posixpath.join(workdir, args))
            workdirs.append(workdir)
        elif op == "ENV":
            pairs = _env_pairs(args)
            if pairs is None:
                return None
            env_pairs.update(pairs)
        elif op == "USER":
            if "$" in args or not args:
                return None
            user = args
        elif op in ("COPY", "ADD"):
            if not _plan_copy(op, args, context, workdir, entries, _dirs(workdirs, entries), file_dests):
                return None
        else:
            return None  # RUN, ARG, CMD, ... : a real build
    if from_image is None:
        return None
    ordered = tuple((path, src, mode) for path, (src, mode) in sorted(entries.items()))
    return Placement(from_image=from_image, entries=ordered, workdir=workdir if workdirs else None,
                     env=tuple(env_pairs.items()), user=user, workdirs=tuple(workdirs),
                     file_dests=tuple(sorted((d, n) for d, n in file_dests.items() if d in entries)))


def _dirs(workdirs: list[str], entries: dict) -> set[str]:
    """Directories the Dockerfile has made so far: "/", every WORKDIR, copied directories, and the
    parents of every copied path."""
    dirs = {"/", *workdirs}
    for path, (source, _mode) in entries.items():
        if source is None:
            dirs.add(path)
        parent = posixpath.dirname(path)
        while parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    return dirs


def _plan_copy(op: str, args: str, context: Path, workdir: str, entries: dict, dirs: set[str],
               file_dests: dict[str, str]) -> bool:
    if args.startswith("[") or "$" in args:
        return False  # JSON form or variables: leave it to the builder
    words = args.split()
    if len(words) < 2 or any(w.startswith("--") for w in words):
        return False  # --chown, --chmod, --from, --link ...
    *sources, dest = words
    if op == "ADD" and any("://" in s or s.endswith(_ARCHIVE_SUFFIXES) for s in sources):
        return False  # ADD fetches URLs and unpacks local archives
    paths: list[Path] = []
    for source in sources:
        matched = sorted(glob.glob(str(context / source))) if any(c in source for c in "*?[") else [str(context / source)]
        for m in matched:
            p = Path(m).resolve()
            if not p.exists() or (p != context and context not in p.parents):
                return False  # missing or outside the context: let the build report it
            paths.append(p)
    if not paths:
        return False
    dest_abs = posixpath.normpath(posixpath.join(workdir, dest))
    # The builder copies a file *into* a destination that ends with "/" (or is "."), or that is a directory
    # already: one an earlier WORKDIR or COPY made (known here), or one of the image (known at placement).
    dest_is_dir = (dest.endswith(("/", "/.")) or dest == "." or len(paths) > 1 or any(p.is_dir() for p in paths)
                   or dest_abs in dirs)
    for p in paths:
        if p.is_dir():
            for child in sorted(p.rglob("*")):
                if child.is_symlink() or not (child.is_dir() or child.is_file()):
                    return False  # links and special files: the builder's rules are subtle, build
                rel = child.relative_to(p).as_posix()
                mode = unprotected_mode(child.stat().st_mode, child.is_dir())
                entries[posixpath.join(dest_abs, rel)] = (None if child.is_dir() else child, mode)
        elif p.is_file() and not p.is_symlink():
            target = posixpath.join(dest_abs, p.name) if dest_is_dir else dest_abs
            entries[target] = (p, unprotected_mode(p.stat().st_mode, False))
            if not dest_is_dir:
                file_dests[dest_abs] = p.name
            else:
                file_dests.pop(target, None)
        else:
            return False
    return True


def prepare(task: Task, resolver: ImageResolver) -> PlacedImage | None:
    """A PlacedImage for a task whose Dockerfile is simple and whose (resolved) FROM image is present;
    None otherwise (the caller builds the task's image as usual)."""
    start = time.monotonic()
    p = plan(task)
    if p is None:
        return None
    resolved = resolver.resolve(p.from_image)
    convention = resolver.alias_record(p.from_image).get("workdir")
    if convention:
        p = plan(task, initial_workdir=convention)
    try:
        image = resolver.client.images.get(resolved)
    except docker.errors.ImageNotFound:
        return None  # not present: the usual path pulls or builds, and reports failures
    substituted = resolved != p.from_image
    return PlacedImage(tag=resolved, id=image.id, substituted_from=p.from_image if substituted else None,
                       substituted_to=resolved if substituted else None, build_s=time.monotonic() - start,
                       cached=True, placement=p,
                       substitutions=tuple(resolver.task_records(
                           task, [resolver.substitution_record(p.from_image, resolved)] if substituted else [])))


def create_overrides(image: TaskImage, kwargs: dict) -> dict:
    """The container create arguments for a placed image: the Dockerfile's workdir (unless the task sets
    one), its env under the task's, and its user. Other images: kwargs unchanged."""
    p = getattr(image, "placement", None)
    if p is None:
        return kwargs
    kwargs = dict(kwargs)
    kwargs["environment"] = {**dict(p.env), **(kwargs.get("environment") or {})}
    if not kwargs.get("working_dir") and p.workdir:
        kwargs["working_dir"] = p.workdir
    if p.user:
        kwargs["user"] = p.user
    return kwargs


def place(container, image: TaskImage) -> None:
    """Put a placed image's files into a created (not yet started) container; no-op for other images."""
    p = getattr(image, "placement", None)
    if p is None:
        return
    entries = p.entries
    if p.file_dests:  # `COPY file /dir` where /dir is a directory of the image: the file goes into it
        into = {dest: posixpath.join(dest, name) for dest, name in p.file_dests if _is_dir(container, dest)}
        if into:
            entries = tuple(sorted((into.get(path, path), src, mode) for path, src, mode in entries))
            p = Placement(p.from_image, entries, p.workdir, p.env, p.user, p.workdirs)
    missing = [w for w in p.workdirs if not any(path == w or path.startswith(w + "/") for path, _, _ in entries)]
    if missing:  # an empty WORKDIR: the builder creates it (0755, root); so do we, unless the image has it
        extra = tuple((w, None, 0o755) for w in missing if not _exists(container, w))
        entries = tuple(sorted(entries + extra))
        p = Placement(p.from_image, entries, p.workdir, p.env, p.user, p.workdirs)
    if entries and not container.put_archive("/", p.archive()):
        raise docker.errors.APIError(f"put_archive of the task files into {container.short_id} failed")


def _is_dir(container, path: str) -> bool:
    """Is `path` a directory in the (created) container's filesystem? One HEAD request: the engine's stat
    header, never an archive of the directory."""
    api = container.client.api
    response = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    if response.status_code != 200:
        return False
    stat = json.loads(base64.b64decode(response.headers.get("X-Docker-Container-Path-Stat", "") or "e30="))
    return bool(int(stat.get("mode", 0)) & (1 << 31))  # Go's os.ModeDir


def _exists(container, path: str) -> bool:
    try:
        stream, _ = container.get_archive(path)
        stream.close() if hasattr(stream, "close") else None
        return True
    except docker.errors.NotFound:
        return False
