"""Offline stand-ins for the public images Terminal-Bench tasks name, faithful to what those images give.

A task's `FROM python:3.13-slim-bookworm` or `FROM ghcr.io/laude-institute/t-bench/python-3-13:...` is
rewritten (task_image.py, alias table) to a *flavour*: a Debian root (the sandbox base image for the base
suite, `debootstrap` of another suite for another Python minor version: trixie has 3.13) plus a thin layer
built here, cached by the hash of its recipe:

  python    python3 + pip + venv, `python` and `pip` on PATH, system-wide installs allowed (the
            EXTERNALLY-MANAGED marker removed and PIP_BREAK_SYSTEM_PACKAGES=1, as official python images
            allow them); the requested minor version where a suite of the mirror has it, else the nearest.
            Laid out as an official image is where tasks can tell: python, python3, python3.X, pip, pip3,
            pip3.X in /usr/local/bin (solutions call /usr/local/bin/python), /usr/local/lib/python3.X/
            site-packages on sys.path, and every Python distribution Debian installed made pip-owned (a
            RECORD written from dpkg's file list, INSTALLER pip), so `pip install -U` may replace any of
            them, as it may anything in an official image's site-packages.
  tbench    the same plus the t-bench base images' conventions: WORKDIR /app, tmux, asciinema.
  base      the base image plus the layer's trust and uv stand-ins only (ubuntu:*, debian:*).

Every layer also carries, read from the host at run time (never from the repository):
  - the certificates the host trusts beyond its distribution's set (an intercepting proxy's CA): added to
    the image's store with update-ca-certificates, SSL_CERT_FILE / REQUESTS_CA_BUNDLE pointing at it;
  - the host's pip index settings (`pip config list`: index-url, extra-index-url, trusted-host, timeout),
    minus host-local paths (find-links, file:// indexes, constraint files do not exist in a container),
    as /etc/pip.conf and UV_INDEX_URL / UV_EXTRA_INDEX_URL;
  - uv, from PyPI (`pip download --no-deps uv==<sandbox.offline.uv_version>`), for verifiers that run
    `curl -LsSf https://astral.sh/uv/<ver>/install.sh | sh; source $HOME/.local/bin/env`. A `curl` shim in
    /usr/local/bin answers exactly that URL with a local installer that copies this uv to
    $HOME/.local/bin and writes the `env` file uv's installer writes; any other URL goes to the real curl.
    Why a shim rather than a pre-installed ~/.local/bin/uv: the script runs unchanged, uv appears only
    when something asks for it (as online; a task where uv is missing stays so for the agent), it lands in
    the $HOME of whoever runs the installer, and an oracle that installs uv itself works too.
    UV_PYTHON_DOWNLOADS=never: `uvx -p 3.13` must find the image's python3.13, never download one.

What was substituted is returned as a dict and recorded in the trial result (image.offline).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import docker

from termagent.sandbox.errors import BuildError

log = logging.getLogger(__name__)

LAYER_VERSION = "2"  # bump when the layer's Dockerfile or files below change
LAYER_REPO = "termagent-flavour"
CONTAINER_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
UV_HOME = "/opt/termagent/uv"  # where the layer COPY puts uv (install.sh and the shim name it)
KINDS = ("base", "python", "tbench")


@dataclass(frozen=True)
class OfflineConfig:
    # Python minor version -> the Debian suite whose python3 it is (the same mirror serves each suite).
    python_suites: dict[str, str] = field(default_factory=lambda: {"3.11": "bookworm", "3.13": "trixie"})
    # Suite of the sandbox base image: that root is the base image itself (no second debootstrap).
    base_suite: str = "bookworm"
    # uv put where a verifier's `curl ... astral.sh/uv/<ver>/install.sh | sh` expects it (one version
    # for every task: a newer uv runs older scripts; the version asked for is recorded next to it).
    uv_version: str = "0.9.5"
    # Debian packages of the python flavour: pip, venv, and `python` -> python3.
    python_packages: list[str] = field(default_factory=lambda: ["python3-pip", "python3-venv", "python-is-python3"])
    # Debian packages of the root removed from the python flavour and pip-installed instead (a task's
    # `pip install pytest==8.4.1` cannot replace a Debian copy: no RECORD file), as on an official image.
    python_purge: list[str] = field(default_factory=lambda: ["python3-pytest", "python3-yaml"])
    # pip-installed in their place (with --ignore-installed: every dependency gets a pip copy too), so that
    # verifiers written against the base image (`python3 -m pytest`) still run.
    python_pip_packages: list[str] = field(default_factory=lambda: ["pytest==8.3.5", "PyYAML==6.0.2"])
    # What ghcr.io/laude-institute/t-bench/* bases add on top (tmux is in the base package set).
    tbench_packages: list[str] = field(default_factory=lambda: ["asciinema"])
    tbench_workdir: str = "/app"  # the t-bench bases' WORKDIR; tasks without one of their own rely on it
    python_workdir: str = "/"  # official python:* images set no WORKDIR
    cache_dir: str = "~/.cache/termagent"  # uv wheels downloaded from the host's index
    # Interpreters a verifier may ask uv for (`uvx -p 3.X`) that its image lacks: minor version -> the Debian
    # suite whose python3.X is bundled for it (termagent/sandbox/pythons.py; built on first use).
    verifier_pythons: dict[str, str] = field(default_factory=lambda: {
        "3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie", "3.14": "forky"})
    # Left out of the base package set for a root of another suite: trixie's cron pulls in systemd, whose
    # configuration fails inside a debootstrap chroot.
    root_drop_packages: list[str] = field(default_factory=lambda: ["cron"])


# ---- what the host trusts ----------------------------------------------------------------------------

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s+(.*?)\s+-----END CERTIFICATE-----", re.DOTALL)
_PIP_KEYS = ("index-url", "extra-index-url", "trusted-host", "timeout", "default-timeout", "retries")


@dataclass(frozen=True)
class HostTrust:
    """The host's extra CA certificates and pip index settings, as they will be put into images."""

    ca_pems: tuple[str, ...]
    pip: dict[str, str]  # [global] settings usable inside a container
    dropped: tuple[str, ...]  # host settings left out (host-local paths), by key only

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps([self.ca_pems, sorted(self.pip.items())]).encode()).hexdigest()

    def summary(self) -> dict:
        """What the trial result records: counts and a digest, never a host name."""
        return {"ca_certificates_added": len(self.ca_pems),
                "pip_settings": sorted(self.pip), "pip_settings_dropped": list(self.dropped),
                "index": "host index-url" if "index-url" in self.pip else "pip default",
                "digest": self.digest[:12]}


def host_trust(env: dict[str, str] | None = None, pip_config: str | None = None,
               distro_dir: str = "/usr/share/ca-certificates") -> HostTrust:
    """Read the host's trust and index settings now (they may change between runs: the layer hash follows).
    `pip_config`: the output of `pip config list` (run when None)."""
    env = dict(os.environ if env is None else env)
    if pip_config is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        pip_config = proc.stdout
    settings: dict[str, str] = {}
    for line in pip_config.splitlines():  # global.cert='/etc/...'   :env:.default-timeout='180'
        key, sep, value = line.partition("=")
        if sep:
            settings[key.rsplit(".", 1)[-1].strip()] = value.strip().strip("'\"")
    for name, value in env.items():  # PIP_INDEX_URL wins over the files, as in pip
        if name.startswith("PIP_") and value:
            settings[name[4:].lower().replace("_", "-")] = value
    pip: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in sorted(settings.items()):
        if key not in _PIP_KEYS:
            if key in ("find-links", "constraint", "requirement", "no-index", "cache-dir"):
                dropped.append(key)
            continue
        parts = value.split()
        kept = [p for p in parts if not (p.startswith(("/", "file:", ".")))]
        if len(kept) < len(parts):
            dropped.append(key if not kept else f"{key} (host-local part)")
        if kept:
            pip["timeout" if key == "default-timeout" else key] = " ".join(kept)

    bundle = next((p for p in (env.get("SSL_CERT_FILE"), env.get("REQUESTS_CA_BUNDLE"), env.get("PIP_CERT"),
                               settings.get("cert"), "/etc/ssl/certs/ca-certificates.crt")
                   if p and os.path.isfile(p)), None)
    host_pems = _pems(Path(bundle).read_text(errors="replace")) if bundle else []
    distro = {body for path in glob.glob(f"{distro_dir}/**/*.crt", recursive=True)
              for body in _pems(Path(path).read_text(errors="replace"))}
    extra = tuple(dict.fromkeys(p for p in host_pems if p not in distro))
    return HostTrust(ca_pems=extra, pip=pip, dropped=tuple(dropped))


def _pems(text: str) -> list[str]:
    return ["".join(m.split()) for m in _PEM.findall(text)]


def _pem_text(body: str) -> str:
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


# ---- uv from the package index -----------------------------------------------------------------------

_UV_LOCK = threading.Lock()


def uv_binaries(version: str, cache_dir: str) -> Path:
    """A directory holding `uv` and `uvx` of `version`, from the uv wheel on the host's package index."""
    target = Path(os.path.expanduser(cache_dir)) / "uv" / version
    with _UV_LOCK:
        if (target / "uv").is_file() and (target / "uvx").is_file():
            return target
        machine = os.uname().machine
        with tempfile.TemporaryDirectory(prefix="termagent-uv-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                   "--platform", f"manylinux_2_17_{machine}", "--python-version", "3.11",
                   f"uv=={version}", "-d", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  env={**os.environ, "PIP_CONSTRAINT": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            wheels = glob.glob(f"{tmp}/uv-*.whl")
            if proc.returncode != 0 or not wheels:
                raise BuildError(f"sandbox.offline.uv_version {version!r}: `pip download uv=={version}` "
                                 f"failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
            staging = Path(tempfile.mkdtemp(prefix="uv-", dir=tmp))
            with zipfile.ZipFile(wheels[0]) as wheel:
                for name in ("uv", "uvx"):
                    member = f"uv-{version}.data/scripts/{name}"
                    (staging / name).write_bytes(wheel.read(member))
                    (staging / name).chmod(0o755)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                shutil.rmtree(target)
            shutil.move(str(staging), str(target))
    return target


UV_INSTALLER = r"""#!/bin/sh
# termagent offline stand-in for uv's installer (https://astral.sh/uv/<version>/install.sh): installs the
# uv that termagent took from the package index (see /opt/termagent/uv/VERSION) the way the real one does.
set -e
version=$(cat /opt/termagent/uv/VERSION)
if [ -n "${UV_INSTALL_DIR:-}" ]; then dir="$UV_INSTALL_DIR"
elif [ -n "${XDG_BIN_HOME:-}" ]; then dir="$XDG_BIN_HOME"
else dir="$HOME/.local/bin"; fi
echo "downloading uv $version $(uname -m)-unknown-linux-gnu (offline: provided by termagent from the package index)"
mkdir -p "$dir"
cp /opt/termagent/uv/bin/uv /opt/termagent/uv/bin/uvx "$dir/"
cat > "$dir/env" <<EOF
#!/bin/sh
# add binaries to PATH if they aren't added yet
# affix colons on either side of \$PATH to simplify matching
case ":\${PATH}:" in
    *:"$dir":*)
        ;;
    *)
        # Prepending path in case a system-installed binary needs to be overridden
        export PATH="$dir:\$PATH"
        ;;
esac
EOF
echo "installing to $dir"
echo "  uv"
echo "  uvx"
echo "everything's installed!"
"""

CURL_SHIM = r"""#!/bin/sh
# termagent offline stand-in: uv's installer URL is answered from the image (uv came from the package
# index); every other request goes to the real curl, unchanged.
out=""
prev=""
installer=""
for arg in "$@"; do
  case "$prev" in -o|--output) out="$arg";; esac
  case "$arg" in
    https://astral.sh/uv/install.sh|https://astral.sh/uv/*/install.sh|http://astral.sh/uv/*install.sh) installer=1;;
  esac
  prev="$arg"
done
if [ -n "$installer" ]; then
  if [ -n "$out" ]; then cp /opt/termagent/uv/install.sh "$out"; else cat /opt/termagent/uv/install.sh; fi
  exit 0
fi
for c in /usr/bin/curl /bin/curl; do [ -x "$c" ] && exec "$c" "$@"; done
echo "curl: command not found" >&2
exit 127
"""


ADOPT_DEBIAN_DISTRIBUTIONS = r"""
# termagent: make the Python distributions Debian installed pip-owned, as everything in an official python
# image's site-packages is: a RECORD (dist-info) or installed-files.txt (egg-info) written from dpkg's
# list of the package's files, INSTALLER pip. Without it `pip install -U X` stops at "Cannot uninstall X
# ... no RECORD file ... installed by debian".
import csv, glob, os, subprocess, sys
adopted = []
for site in sorted(set(glob.glob("/usr/lib/python3/dist-packages") + glob.glob("/usr/lib/python3.*/dist-packages"))):
    for meta in sorted(glob.glob(os.path.join(site, "*.dist-info")) + glob.glob(os.path.join(site, "*.egg-info"))):
        if not os.path.isdir(meta):
            continue
        record = os.path.join(meta, "RECORD" if meta.endswith(".dist-info") else "installed-files.txt")
        if os.path.exists(record):
            continue
        owner = subprocess.run(["dpkg", "-S", meta], capture_output=True, text=True)
        if owner.returncode != 0:
            continue
        package = owner.stdout.split(":", 1)[0].strip()
        files = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout.split()
        files = [f for f in files if os.path.isfile(f) or os.path.islink(f)]
        if meta.endswith(".dist-info"):
            with open(record, "w", newline="") as out:
                writer = csv.writer(out)
                for f in files:
                    writer.writerow([os.path.relpath(f, site) if f.startswith(site + "/") else f, "", ""])
                writer.writerow([os.path.relpath(record, site), "", ""])
        else:
            with open(record, "w") as out:
                out.writelines(os.path.relpath(f, meta) + "\n" for f in files)
        with open(os.path.join(meta, "INSTALLER"), "w") as out:
            out.write("pip\n")
        adopted.append(os.path.basename(meta))
print("pip-owned now:", " ".join(adopted) or "-")
"""


def official_layout() -> str:
    """Shell that lays the Debian python out as an official python image is, where a task can tell."""
    return (
        "v=$(python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'); "
        "for n in python python3 python$v; do ln -sf /usr/bin/python$v /usr/local/bin/$n; done; "
        "for n in pip pip3 pip$v; do printf '#!/bin/sh\\nexec /usr/bin/python%s -m pip \"$@\"\\n' $v "
        "> /usr/local/bin/$n; chmod 755 /usr/local/bin/$n; done; "
        "mkdir -p /usr/local/lib/python$v/site-packages /usr/local/lib/python$v/dist-packages; "
        "echo \"import site; site.addsitedir('/usr/local/lib/python$v/site-packages')\" "
        "> /usr/local/lib/python$v/dist-packages/termagent-site-packages.pth; "
        "python3 /opt/termagent/adopt.py; rm /opt/termagent/adopt.py; ")


# ---- flavours ------------------------------------------------------------------------------------------

_TBENCH_PYTHON = re.compile(r"python-(\d+)-(\d+)")
_TBENCH_UBUNTU = {"20-04": "3.8", "22-04": "3.10", "24-04": "3.12"}  # the python3 of each Ubuntu release


def requested_python(kind: str, image: str) -> str | None:
    """The Python minor version an image name implies: python:3.13-slim -> 3.13, t-bench python-3-13 ->
    3.13, t-bench ubuntu-24-04 -> 3.12 (Ubuntu's python3); None: no version named (newest available)."""
    tag = image.rsplit("/", 1)[-1]
    if kind == "python":
        m = re.match(r"python:(\d+)\.(\d+)", tag)
        return f"{m.group(1)}.{m.group(2)}" if m else None
    if kind == "tbench":
        m = _TBENCH_PYTHON.search(tag)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
        for release, version in _TBENCH_UBUNTU.items():
            if f"ubuntu-{release}" in tag:
                return version
    return None


def choose_python(requested: str | None, available: dict[str, str]) -> str:
    """The available minor version for a request: the same one, else the nearest (the newer on a tie)."""
    if not available:
        raise BuildError("sandbox.offline.python_suites is empty: no Python flavour can be built")
    if requested in available:
        return requested

    def key(v: str) -> tuple[int, int]:
        major, minor = v.split(".")
        return int(major), int(minor)

    if requested is None:
        return max(available, key=key)
    want = key(requested)
    return min(available, key=lambda v: (abs(key(v)[1] - want[1]) + 100 * abs(key(v)[0] - want[0]), -key(v)[1]))


@dataclass(frozen=True)
class Flavour:
    kind: str  # base | python | tbench
    suite: str
    packages: tuple[str, ...]
    workdir: str | None  # set on top of the task's FROM (None: the root's own)
    python_requested: str | None
    python_minor: str | None


class FlavourBuilder:
    """Builds (or finds) the flavour images the alias table points at, one build per recipe hash."""

    def __init__(self, client: docker.DockerClient, base_image: str, config: OfflineConfig | None = None):
        self.client = client
        self.base_image = base_image
        self.config = config or OfflineConfig()
        self._trust: HostTrust | None = None
        self._lock = threading.Lock()
        self._built: dict[str, dict] = {}  # layer tag -> record

    @property
    def trust(self) -> HostTrust:
        if self._trust is None:
            self._trust = host_trust()
        return self._trust

    def flavour(self, kind: str, image: str) -> Flavour:
        if kind not in KINDS:
            raise BuildError(f"sandbox.image_aliases: unknown target {kind!r} for {image!r} "
                             f"(one of {', '.join(KINDS)}, or an image name)")
        cfg = self.config
        if kind == "base":
            return Flavour("base", cfg.base_suite, (), None, None, None)
        requested = requested_python(kind, image)
        minor = choose_python(requested, cfg.python_suites)
        packages = tuple(cfg.python_packages) + (tuple(cfg.tbench_packages) if kind == "tbench" else ())
        workdir = cfg.tbench_workdir if kind == "tbench" else cfg.python_workdir
        return Flavour(kind, cfg.python_suites[minor], packages, workdir, requested, minor)

    def ensure(self, kind: str, image: str) -> tuple[str, dict]:
        """(image tag to build FROM, record of the substitution) for an aliased `image`."""
        flavour = self.flavour(kind, image)
        with self._lock:
            root = self._root(flavour.suite)
            root_id = self.client.images.get(root).id
            trust = self.trust
            pip = self._pip_plan(flavour)
            spec = {"layer": LAYER_VERSION, "root": root_id, "packages": sorted(flavour.packages), "pip": pip,
                    "trust": trust.digest, "uv": self.config.uv_version,
                    "files": hashlib.sha256((UV_INSTALLER + CURL_SHIM + ADOPT_DEBIAN_DISTRIBUTIONS
                                             + official_layout()).encode()).hexdigest()}
            digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
            tag = f"{LAYER_REPO}:{flavour.kind if flavour.kind == 'base' else 'py'}-{flavour.suite}-{digest[:12]}"
            if tag not in self._built:
                try:
                    self.client.images.get(tag)
                    built = False
                except docker.errors.ImageNotFound:
                    self._build_layer(tag, root, flavour, trust)
                    built = True
                record = {"flavour_image": tag, "root": root, "suite": flavour.suite, "built_now": built,
                          "trust": trust.summary(),
                          "uv": {"version": self.config.uv_version, "how": "curl shim for astral.sh/uv installer URLs"}}
                if flavour.packages:
                    record["python"] = self._python_version(tag)
                    record["pip_replaced_debian"] = {"purged": list(pip[0]), "pip_installed": list(pip[1])}
                self._built[tag] = record
            record = dict(self._built[tag])
        record.update(kind=flavour.kind, workdir=flavour.workdir)
        if flavour.kind != "base":
            record["python"] = {"requested": flavour.python_requested, "provided": record["python"]}
        return tag, record

    def _pip_plan(self, flavour: Flavour) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if not flavour.packages:
            return (), ()
        return tuple(self.config.python_purge), tuple(self.config.python_pip_packages)

    def _root(self, suite: str) -> str:
        if suite == self.config.base_suite:
            return self.base_image
        from termagent.sandbox.image import BASE_PACKAGES, BaseImageRecipe, ensure_base_image

        name = self.base_image.split(":")[0]
        packages = tuple(p for p in BASE_PACKAGES if p not in self.config.root_drop_packages)
        # auto: debootstrap where the host has a Debian mirror (as before), the registry's Dockerfile elsewhere
        recipe = BaseImageRecipe(name=f"{name}-{suite}", recipe="auto", suite=suite, packages=packages)
        return ensure_base_image(recipe, self.client).tag

    def _python_version(self, tag: str) -> str:
        out = self.client.containers.run(tag, ["python3", "-c", "import platform; print(platform.python_version())"],
                                         remove=True, network_mode="none")
        return out.decode().strip()

    def _build_layer(self, tag: str, root: str, flavour: Flavour, trust: HostTrust) -> None:
        uv_dir = uv_binaries(self.config.uv_version, self.config.cache_dir)
        log.info("building flavour %s on %s (%s)", tag, root, ", ".join(flavour.packages) or "trust + uv only")
        with tempfile.TemporaryDirectory(prefix="termagent-flavour-") as ctx:
            files = Path(ctx) / "termagent"
            (files / "certs").mkdir(parents=True)
            (files / "uv" / "bin").mkdir(parents=True)
            for i, pem in enumerate(trust.ca_pems):
                (files / "certs" / f"termagent-host-{i:03d}.crt").write_text(_pem_text(pem))
            pip_conf = ["[global]", f"cert = {CONTAINER_BUNDLE}", "break-system-packages = true"]
            pip_conf += [f"{k} = {v}" for k, v in sorted(trust.pip.items())]
            (files / "pip.conf").write_text("\n".join(pip_conf) + "\n")
            for name in ("uv", "uvx"):
                shutil.copy2(uv_dir / name, files / "uv" / "bin" / name)
            (files / "uv" / "VERSION").write_text(self.config.uv_version + "\n")
            (files / "uv" / "install.sh").write_text(UV_INSTALLER)
            (files / "curl").write_text(CURL_SHIM)
            if flavour.packages:
                (files / "adopt.py").write_text(ADOPT_DEBIAN_DISTRIBUTIONS)
            env = {"PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_ROOT_USER_ACTION": "ignore",
                   "SSL_CERT_FILE": CONTAINER_BUNDLE, "REQUESTS_CA_BUNDLE": CONTAINER_BUNDLE,
                   "UV_PYTHON_DOWNLOADS": "never"}
            if "index-url" in trust.pip:
                env["UV_INDEX_URL"] = trust.pip["index-url"]
            if "extra-index-url" in trust.pip:
                env["UV_EXTRA_INDEX_URL"] = trust.pip["extra-index-url"]
            python = ""
            if flavour.packages:
                purge, pip = self._pip_plan(flavour)
                python = ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                          f"--no-install-recommends {' '.join(sorted(flavour.packages))} >/dev/null; "
                          + (f"DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq {' '.join(purge)} >/dev/null; "
                             if purge else "")
                          + "rm -rf /var/lib/apt/lists/*; rm -f /usr/lib/python3*/EXTERNALLY-MANAGED; "
                          + (f"python3 -m pip install -q --no-cache-dir --ignore-installed {' '.join(pip)}; "
                             if pip else "")
                          + official_layout()
                          + "python --version; pip --version; ")
            dockerfile = "\n".join([
                f"FROM {root}",
                "COPY termagent /opt/termagent",
                ("RUN set -e; cp /opt/termagent/certs/*.crt /usr/local/share/ca-certificates/ 2>/dev/null || true; "
                "update-ca-certificates >/dev/null 2>&1; mv /opt/termagent/pip.conf /etc/pip.conf; "
                f"{python}"
                "install -m 755 /opt/termagent/curl /usr/local/bin/curl && rm /opt/termagent/curl; "
                f"chmod 755 {UV_HOME}/bin/* {UV_HOME}/install.sh"),
                "ENV " + " ".join(f"{k}={json.dumps(v)}" for k, v in env.items()),
                f"LABEL termagent.flavour={json.dumps(flavour.kind)} termagent=1",
                "",
            ])
            (Path(ctx) / "Dockerfile").write_text(dockerfile)
            try:
                self.client.images.build(path=ctx, tag=tag, rm=True, forcerm=True)
            except docker.errors.BuildError as e:
                tail = "".join(str(c.get("stream", c.get("error", ""))) for c in e.build_log)[-3000:]
                raise BuildError(f"building flavour image {tag} on {root} failed: {e.msg}\n{tail}") from e
            except docker.errors.APIError as e:
                raise BuildError(f"building flavour image {tag} on {root} failed: {e}") from e


def uv_requested(*texts: str) -> list[str]:
    """uv versions a task's scripts ask the installer URL for (recorded next to the version provided)."""
    found = []
    for text in texts:
        found += re.findall(r"astral\.sh/uv/(\d[\w.]*)/install\.sh", text)
    return sorted(set(found))
