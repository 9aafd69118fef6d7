"""Interpreters for verifiers that ask uv for a Python the task's image lacks.

A published TB2 verifier runs `uvx -p 3.13 -w pytest==8.4.1 ... pytest` whatever its image is: on Debian
bookworm or Ubuntu (python3 3.11 / 3.12), uv finds no 3.13 and, with downloads off (UV_PYTHON_DOWNLOADS=
never: nothing is fetched at run time), the verifier dies with `No interpreter found for Python 3.13`.
Online, uv would download a standalone CPython into its own cache, outside the agent's view.

Here the Debian mirror supplies the interpreter: for each minor version of `sandbox.offline.verifier_pythons`
(minor -> the Debian suite whose python3.X it is: 3.9 bullseye, 3.11 bookworm, 3.13 trixie, 3.14 forky)
a *relocatable bundle* is built once, in a container of that suite's root: /usr/bin/python3.X and its
standard library, plus every shared library it and its extension modules load (glibc's loader included),
the binary patched (patchelf) to use that loader and those libraries by absolute path under
/opt/termagent/python/3.X. It runs in any Linux container of the same architecture, whatever its libc,
and a venv made from it (uv's) works, because getpath finds the standard library next to the binary.

The bundle is put into the trial's container **after the agent phase**, only for the minor versions the
task's test scripts ask uv for (`-p 3.X`, `--python 3.X`, `UV_PYTHON=3.X`) and the container has no
python3.X of its own (one `command -v` probe), and its bin directory is
appended to PATH of the verifier's command only: the agent's image and environment are unchanged, and an
interpreter the image has (or the agent installed) is still found first, as uv would find it online.
What was provided (or could not be) is recorded in the trial's image record (`verifier_pythons`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import tarfile
import threading
import time
from pathlib import Path

import docker

from termagent.sandbox.errors import BuildError

log = logging.getLogger(__name__)

ROOT = "/opt/termagent/python"  # /opt/termagent/python/3.X/{bin/python3.X, lib/...}
BUNDLE_VERSION = "1"  # bump when BUNDLE_SCRIPT changes in a way the digest would not see

# Runs as root in a container of the suite's root image (default bridge network: the mirror is reachable).
BUNDLE_SCRIPT = r"""
set -eu
v="$1"; d="$2"
export DEBIAN_FRONTEND=noninteractive
# A testing suite's Release (forky) carries a Valid-Until that a dated mirror snapshot outlives
apt-get -o Acquire::Check-Valid-Until=false update -qq
apt-get install -y -qq --no-install-recommends "python$v" patchelf >/dev/null
# Debian ships distutils apart (python3-distutils, up to 3.11); uv refuses a 3.9 without it
if ! "python$v" -c 'import distutils.command.install, distutils.sysconfig' 2>/dev/null; then
  apt-get install -y -qq --no-install-recommends python3-distutils >/dev/null 2>&1 || true
fi
exe=$(command -v "python$v")
mkdir -p "$d/bin" "$d/lib"
cp -L "$exe" "$d/bin/python$v"
cp -a "/usr/lib/python$v" "$d/lib/"
rm -rf "$d/lib/python$v/test" "$d/lib/python$v/idlelib" "$d/lib/python$v/config-"* \
       "$d/lib/python$v/site-packages" "$d/lib/python$v/dist-packages"
interp=$(patchelf --print-interpreter "$exe")
cp -L "$interp" "$d/lib/"
{ ldd "$exe"; find "$d/lib/python$v/lib-dynload" -name '*.so' -exec ldd {} \; ; } 2>/dev/null \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do cp -L "$lib" "$d/lib/"; done
# --no-sort: without it patchelf 0.18 rewrites the (non-PIE) executable into one that segfaults when both are
# changed; older patchelf (bullseye's 0.12) has no such option
sort=""; patchelf --help 2>&1 | grep -q -- --no-sort && sort=--no-sort
patchelf $sort --set-interpreter "$d/lib/$(basename "$interp")" --force-rpath --set-rpath "$d/lib" "$d/bin/python$v"
# It must run without the suite's libraries: from an empty library path, with only the bundle's.
env -i PATH=/nonexistent "$d/bin/python$v" -c 'import ssl, sqlite3, ctypes, zlib, lzma, bz2, json, venv, sys; print(sys.version.split()[0], sys.prefix)'
tar -C / -cf /bundle.tar "${d#/}"
"""


class VerifierPythons:
    """Builds (once per suite root and script) and provides the bundles; thread-safe."""

    def __init__(self, client: docker.DockerClient, flavours, config):
        self.client = client
        self.flavours = flavours  # FlavourBuilder: its roots (one per Debian suite)
        self.config = config
        self._lock = threading.Lock()
        self._bundles: dict[str, tuple[bytes, dict] | BuildError] = {}

    # ---- which versions -----------------------------------------------------------------------------

    def requested(self, task) -> list[str]:
        """Minor versions the task's test scripts ask uv for (sorted)."""
        texts = []
        paths = sorted(task.tests_dir.glob("*.sh")) if task.tests_dir and task.tests_dir.is_dir() else []
        for path in [*paths, *getattr(task, "extra_test_files", {}).values()]:
            try:
                texts.append(path.read_text(errors="replace"))
            except OSError:
                pass
        return uv_python_requests(*texts)

    # ---- bundles ------------------------------------------------------------------------------------

    def bundle(self, minor: str) -> tuple[bytes, dict]:
        """(tar to extract at /, record) of the bundle for `minor`; BuildError when it cannot be made."""
        suites = self.config.verifier_pythons
        if minor not in suites:
            raise BuildError(f"Python {minor} is not in sandbox.offline.verifier_pythons "
                             f"(available: {', '.join(sorted(suites, key=_key)) or 'none'})")
        with self._lock:
            cached = self._bundles.get(minor)
            if isinstance(cached, BuildError):
                raise cached
            if cached is not None:
                return cached
            try:
                result = self._build(minor, suites[minor])
            except BuildError as e:
                self._bundles[minor] = e
                raise
            self._bundles[minor] = result
            return result

    def _build(self, minor: str, suite: str) -> tuple[bytes, dict]:
        root = self.flavours._root(suite)
        root_id = self.client.images.get(root).id
        digest = hashlib.sha256(f"{BUNDLE_VERSION}\0{root_id}\0{BUNDLE_SCRIPT}".encode()).hexdigest()[:12]
        cache = Path(os.path.expanduser(self.config.cache_dir)) / "pythons" / f"python{minor}-{suite}-{digest}.tar"
        record = {"minor": minor, "suite": suite, "root": root, "bundle": cache.name}
        if cache.is_file():
            return cache.read_bytes(), {**record, "built_now": False}
        log.info("building the verifier Python %s bundle from %s (%s)", minor, suite, root)
        start = time.monotonic()
        container = self.client.containers.create(root, ["bash", "-c", BUNDLE_SCRIPT, "bundle", minor,
                                                         f"{ROOT}/{minor}"], labels={"termagent": "1"})
        try:
            container.start()
            status = container.wait(timeout=900)
            output = container.logs().decode(errors="replace")
            if status.get("StatusCode") != 0:
                raise BuildError(f"building the Python {minor} bundle from {suite} ({root}) failed "
                                 f"(exit {status.get('StatusCode')}):\n{output[-2000:]}")
            stream, _ = container.get_archive("/bundle.tar")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as outer:
                data = outer.extractfile(outer.next()).read()
        except docker.errors.DockerException as e:
            raise BuildError(f"building the Python {minor} bundle from {suite} failed: {e}") from e
        finally:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
        record["python"] = output.strip().splitlines()[-1].split()[0] if output.strip() else None
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(cache)  # atomic: a concurrent run sees the whole bundle or none
        return data, {**record, "built_now": True, "build_s": round(time.monotonic() - start, 1)}

    # ---- into a trial -------------------------------------------------------------------------------

    def provide(self, trial) -> tuple[dict[str, str], dict | None]:
        """Put the bundles the task's verifier asks for into the trial's container; returns (env for the
        verifier's command: PATH with the bundles' bin directories appended, record) — ({}, None) when the
        task asks for none."""
        wanted = self.requested(trial.task)
        if not wanted:
            return {}, None
        record: dict = {"requested": wanted, "in_image": [], "provided": {}, "unavailable": {}}
        # What the container already has (the image's or the agent's python3.X) is what uv finds first
        # anyway: nothing to put in for it.
        probe = trial.exec(["sh", "-c", "for v in " + " ".join(wanted) + "; do command -v python$v >/dev/null "
                            "&& echo $v; done; true"], timeout=30)
        record["in_image"] = [v for v in probe.output.split() if v in wanted]
        dirs = []
        for minor in wanted:
            if minor in record["in_image"]:
                continue
            try:
                data, info = self.bundle(minor)
                if not trial.container.put_archive("/", data):
                    raise BuildError(f"put_archive of the Python {minor} bundle failed")
            except BuildError as e:
                record["unavailable"][minor] = str(e).splitlines()[0][:300]
                continue
            record["provided"][minor] = info
            dirs.append(f"{ROOT}/{minor}/bin")
        if not dirs:
            return {}, record
        return {"PATH": ":".join([container_path(trial.container), *dirs])}, record


def container_path(container) -> str:
    """PATH of the container's environment (the image's, or the create call's)."""
    for item in (container.attrs.get("Config") or {}).get("Env") or []:
        if item.startswith("PATH="):
            return item[5:]
    return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


_CONTINUATION = re.compile(r"\\\r?\n")
_UV_LINE = re.compile(r"^.*\buvx?\b.*$", re.MULTILINE)
_PYTHON_FLAG = re.compile(r"(?:\s-p|\s--python)(?:\s+|=)[\"']?(?:c?python-?)?(3\.\d+)\b")
_UV_PYTHON_ENV = re.compile(r"\bUV_PYTHON=[\"']?(?:c?python-?)?(3\.\d+)\b")


def uv_python_requests(*texts: str) -> list[str]:
    """Python minor versions scripts ask uv for: `uvx -p 3.13`, `uv run --python=3.12`, `UV_PYTHON=3.11`
    (continuation lines joined first)."""
    found: set[str] = set()
    for text in texts:
        text = _CONTINUATION.sub(" ", text)
        for line in _UV_LINE.findall(text):
            found.update(_PYTHON_FLAG.findall(line))
        found.update(_UV_PYTHON_ENV.findall(text))
    return sorted(found, key=_key)


def _key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest or 0)
