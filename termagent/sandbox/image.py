"""The sandbox base image: every task image is built on it (directly, or through the alias table).

Two recipes make the same image:
  debootstrap  offline: `debootstrap --variant=minbase` of a Debian suite from the host's own apt mirror,
               then `tar | docker import`. Needs root and debootstrap, no registry.
  dockerfile   recipes/Dockerfile.base (FROM debian:<suite>-slim + apt-get install), for hosts that can pull.
`sandbox.recipe: auto` picks one per host (`choose_recipe`, the H100 profile's setting): a recipe whose image
is already built, else debootstrap where the host's apt sources name a Debian mirror, else dockerfile where the
registry answers (an Ubuntu GPU host), else an error saying why neither can work.

The tag is `<name>:<recipe hash[:12]>` (hash of recipe kind, suite, package list and RECIPE_VERSION), plus a
`<name>:latest` alias, so the image is rebuilt only when the recipe changes.

Its record (`BaseImage.record()`, data/image.json, what task-running stages depend on) is content-addressed:
the recipe hash and the package versions resolved inside the image (`dpkg-query -W`), never the local image
id, which differs on every build (debootstrap is not bit-reproducible). Two machines that build the same
recipe from the same mirror write the same bytes. The local id and size go to `BaseImage.local()` (a
sidecar no stage depends on).
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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import docker

from termagent.sandbox.errors import BuildError

log = logging.getLogger(__name__)

# Bump when the build steps below change in a way that changes the image.
RECIPE_VERSION = "1"
RECIPES_DIR = Path(__file__).parent / "recipes"

# What a terminal task may expect to find. Order is irrelevant (sorted into the hash).
BASE_PACKAGES: tuple[str, ...] = (
    # shell and core tools
    "bash", "coreutils", "findutils", "grep", "sed", "gawk", "diffutils", "less", "vim-tiny", "file", "bc",
    "procps", "psmisc", "util-linux", "tmux", "cron",
    # archives
    "tar", "gzip", "bzip2", "xz-utils", "zip", "unzip",
    # languages and build tools
    "python3", "python3-pytest", "python3-yaml", "make", "gcc", "libc6-dev", "patch",
    # data formats and version control
    "jq", "sqlite3", "git",
    # networking (loopback tasks, downloads on public-network tasks)
    "curl", "wget", "ca-certificates", "iproute2", "netcat-openbsd",
)

IMAGE_ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class BaseImageRecipe:
    name: str = "termagent-base"
    recipe: Literal["debootstrap", "dockerfile", "auto"] = "debootstrap"  # auto: resolve_recipe picks one
    suite: str = "bookworm"
    packages: tuple[str, ...] = field(default=BASE_PACKAGES)

    @property
    def hash(self) -> str:
        spec = {
            "recipe": self.recipe,
            "suite": self.suite,
            "packages": sorted(set(self.packages)),
            "version": RECIPE_VERSION,
        }
        if self.recipe == "dockerfile":
            spec["dockerfile"] = (RECIPES_DIR / "Dockerfile.base").read_text()
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    @property
    def tag(self) -> str:
        return f"{self.name}:{self.hash[:12]}"

    @property
    def latest(self) -> str:
        return f"{self.name}:latest"


@dataclass(frozen=True)
class BaseImage:
    tag: str
    id: str
    recipe: BaseImageRecipe
    built: bool  # False: the tag already existed
    build_s: float
    size_bytes: int
    installed: dict[str, str] = field(default_factory=dict)  # "package:arch" -> version, inside the image

    def record(self) -> dict:
        """What the image is, identical on every machine building the same recipe from the same mirror."""
        return {
            "image": self.recipe.tag,
            "recipe": self.recipe.recipe,
            "recipe_hash": self.recipe.hash,
            "suite": self.recipe.suite,
            "packages": sorted(set(self.recipe.packages)),
            "installed": dict(sorted(self.installed.items())),
        }

    def local(self) -> dict:
        """This machine's copy: the engine's id and size (differ on every build; never a DVC dependency)."""
        return {"image": self.tag, "id": self.id, "size_bytes": self.size_bytes, "built": self.built}


def ensure_base_image(recipe: BaseImageRecipe, client: docker.DockerClient | None = None,
                      progress: bool = True) -> BaseImage:
    """Return the base image for `recipe` (auto: the recipe `resolve_recipe` picks), building it only when its
    tag is absent."""
    client = client or docker.from_env()
    recipe, _ = resolve_recipe(recipe, client)
    start = time.monotonic()
    built = False
    try:
        image = client.images.get(recipe.tag)
    except docker.errors.ImageNotFound:
        image = build_base_image(recipe, client, progress)
        built = True
    if recipe.latest not in image.tags:
        image.tag(recipe.name, "latest")
    return describe(recipe, image, client, built=built, build_s=time.monotonic() - start)


def build_base_image(recipe: BaseImageRecipe, client: docker.DockerClient, progress: bool = True,
                     tag: str | None = None):
    """Build `recipe` into `tag` (default: its hash tag), whether or not it exists; the docker Image."""
    tag = tag or recipe.tag
    if recipe.recipe == "debootstrap":
        _build_debootstrap(recipe, client, progress, tag)
    elif recipe.recipe == "dockerfile":
        _build_dockerfile(recipe, client, tag)
    else:
        raise BuildError(f"sandbox.recipe must be 'debootstrap' or 'dockerfile' (or auto, resolved before a build), "
                         f"got {recipe.recipe!r}")
    return client.images.get(tag)


def describe(recipe: BaseImageRecipe, image, client: docker.DockerClient, *, built: bool = False,
             build_s: float = 0.0) -> BaseImage:
    """The BaseImage of a docker Image built from `recipe`, with the package versions resolved inside it."""
    return BaseImage(tag=recipe.tag, id=image.id, recipe=recipe, built=built, build_s=build_s,
                     size_bytes=int(image.attrs.get("Size", 0)), installed=installed_packages(image.id, client))


def installed_packages(image: str, client: docker.DockerClient) -> dict[str, str]:
    """"package:arch" -> version of every package dpkg knows inside `image` (a throwaway container)."""
    from termagent.sandbox import reaper

    try:
        out = client.containers.run(
            image, ["dpkg-query", "-W", "-f", "${Package}:${Architecture}=${Version}\\n"], remove=True,
            network_disabled=True, labels={reaper.LABEL: "1", reaper.OWNER_LABEL: reaper.owner_id()})
    except docker.errors.DockerException as e:
        raise BuildError(f"dpkg-query in {image} failed: {e}") from e
    return dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)


RECIPES: tuple[str, ...] = ("debootstrap", "dockerfile")
# Debian's release names and aliases: an apt entry for one of these is a Debian mirror, which serves every
# current suite under the same URI. An Ubuntu host's entries (jammy, noble, ...) are not: its archive has no
# Debian suite to bootstrap.
DEBIAN_SUITES = frozenset({"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid", "stable",
                           "testing", "unstable", "oldstable", "oldoldstable"})


@dataclass(frozen=True)
class RecipeChoice:
    recipe: str  # debootstrap | dockerfile
    reason: str


def choose_recipe(suite: str, *, present: set[str] | frozenset[str] = frozenset(), apt_dir: str = "/etc/apt",
                  debootstrap_tool: str | None = "debootstrap", is_root: bool = True,
                  registry: str | None = None) -> RecipeChoice:
    """What `sandbox.recipe: auto` builds with, in this order:
    1. a recipe in `present` (its image tag already exists locally; debootstrap first);
    2. debootstrap, when the host's apt sources (`apt_dir`) name a Debian mirror, `debootstrap_tool` is an
       installed program (None: not installed) and `is_root`;
    3. dockerfile, when `registry` is "ok" (a pull of debian:<suite>-slim would work), otherwise `registry`
       says why it would not;
    else a BuildError naming both reasons."""
    for recipe in RECIPES:
        if recipe in present:
            return RecipeChoice(recipe, f"the {recipe} image is already built")
    try:
        mirror = debian_mirror(suite, apt_dir)
        if debootstrap_tool is None:
            no_debootstrap = f"the host has a Debian mirror ({mirror}) but debootstrap is not installed"
        elif not is_root:
            no_debootstrap = f"the host has a Debian mirror ({mirror}) but debootstrap needs root"
        else:
            return RecipeChoice("debootstrap", f"the host's apt sources name a Debian mirror: {mirror}")
    except BuildError as e:
        no_debootstrap = str(e).split(";")[0]
    if registry == "ok":
        return RecipeChoice("dockerfile", f"{no_debootstrap}; the registry serves debian:{suite}-slim")
    raise BuildError(f"sandbox.recipe auto: no way to build the base image on this host. debootstrap: "
                     f"{no_debootstrap}. dockerfile: {registry or 'the registry was not asked'}. Give the host a "
                     f"Debian apt mirror (sources.list / sources.list.d) or registry access, or set "
                     f"sandbox.recipe explicitly")


def registry_status(suite: str, client: docker.DockerClient) -> str:
    """"ok" when the dockerfile recipe's FROM image (debian:<suite>-slim) is local or the registry describes
    it (a manifest lookup, nothing pulled); else why not."""
    ref = f"debian:{suite}-slim"
    try:
        client.images.get(ref)
        return "ok"
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.get_registry_data(ref)
        return "ok"
    except docker.errors.DockerException as e:
        return f"the registry did not answer for {ref} ({str(e).splitlines()[0][:300]})"


def resolve_recipe(recipe: BaseImageRecipe, client: docker.DockerClient | None = None,
                   apt_dir: str = "/etc/apt") -> tuple[BaseImageRecipe, str]:
    """`recipe` itself unless its kind is auto; then the recipe `choose_recipe` picks on this host, and why."""
    from dataclasses import replace

    if recipe.recipe != "auto":
        return recipe, f"sandbox.recipe: {recipe.recipe}"
    client = client or docker.from_env()
    present = set()
    for kind in RECIPES:
        try:
            client.images.get(replace(recipe, recipe=kind).tag)
            present.add(kind)
        except docker.errors.ImageNotFound:
            pass
    tool = shutil.which("debootstrap")
    root = os.geteuid() == 0
    registry = None
    if not present:
        try:
            debian_mirror(recipe.suite, apt_dir)
            mirror = True
        except BuildError:
            mirror = False
        if not (mirror and tool and root):  # ask the registry only when debootstrap cannot work
            registry = registry_status(recipe.suite, client)
    choice = choose_recipe(recipe.suite, present=present, apt_dir=apt_dir, debootstrap_tool=tool, is_root=root,
                           registry=registry)
    log.info("sandbox.recipe auto -> %s (%s)", choice.recipe, choice.reason)
    return replace(recipe, recipe=choice.recipe), choice.reason


def apt_mirror(suite: str, apt_dir: str = "/etc/apt") -> str:
    """The Debian mirror of the host's apt configuration (deb822 .sources first, then sources.list).
    Read at run time: no registry host is ever written into the repository."""
    for path in sorted(glob.glob(f"{apt_dir}/sources.list.d/*.sources")):
        for stanza in re.split(r"\n\s*\n", Path(path).read_text()):
            fields = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in stanza.splitlines() if ":" in line)
                if not k.startswith("#")
            }
            if suite in fields.get("suites", "").split() and fields.get("uris"):
                return fields["uris"].split()[0]
    for path in [f"{apt_dir}/sources.list", *sorted(glob.glob(f"{apt_dir}/sources.list.d/*.list"))]:
        if not os.path.exists(path):
            continue
        for line in Path(path).read_text().splitlines():
            parts = re.sub(r"\[[^]]*\]", "", line).split()  # drop "[signed-by=...]" options
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                return parts[1]
    raise BuildError(f"no apt mirror for suite {suite!r} in {apt_dir}/sources.list.d/*.sources or "
                     f"{apt_dir}/sources.list; set sandbox.recipe: dockerfile (or auto) on a host with registry "
                     "access")


def debian_mirror(suite: str, apt_dir: str = "/etc/apt") -> str:
    """The mirror for `suite`; for a suite the host's apt configuration does not list (a host on bookworm
    building a trixie root), the mirror of the host's own main Debian suite: a Debian mirror serves every
    current suite under the same URI. Only Debian suites of the host count (an Ubuntu archive serves none)."""
    try:
        return apt_mirror(suite, apt_dir)
    except BuildError:
        for host_suite in (s for s in _host_suites(apt_dir) if s in DEBIAN_SUITES):
            try:
                return apt_mirror(host_suite, apt_dir)
            except BuildError:
                continue
        raise


def _host_suites(apt_dir: str) -> list[str]:
    """The main suites (no -updates/-security) named in the host's apt configuration."""
    suites: list[str] = []
    for path in sorted(glob.glob(f"{apt_dir}/sources.list.d/*.sources")):
        for line in Path(path).read_text().splitlines():
            if line.lower().startswith("suites:"):
                suites += [s for s in line.split(":", 1)[1].split() if "-" not in s and "/" not in s]
    for path in [f"{apt_dir}/sources.list", *sorted(glob.glob(f"{apt_dir}/sources.list.d/*.list"))]:
        if os.path.exists(path):
            for line in Path(path).read_text().splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line).split()
                if len(parts) >= 3 and parts[0] == "deb" and "-" not in parts[2] and "/" not in parts[2]:
                    suites.append(parts[2])
    return list(dict.fromkeys(suites))


def _run(cmd: list[str], what: str, **kwargs) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:4])} ...\n"
                         f"{proc.stdout[-4000:]}")


def _build_debootstrap(recipe: BaseImageRecipe, client: docker.DockerClient, progress: bool, tag: str) -> None:
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is not installed (apt-get install debootstrap), "
                         "or set sandbox.recipe: dockerfile")
    if os.geteuid() != 0:
        raise BuildError("the debootstrap recipe needs root (it creates device nodes and chroots)")
    mirror = debian_mirror(recipe.suite)
    workdir = Path(tempfile.mkdtemp(prefix="termagent-base-", dir="/var/tmp"))
    rootfs, tarball = workdir / "rootfs", workdir / "rootfs.tar"
    try:
        log.info("debootstrap %s (%d packages) from the host's apt mirror", recipe.suite, len(recipe.packages))
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(sorted(set(recipe.packages)))}",
               recipe.suite, str(rootfs), mirror]
        scripts = Path("/usr/share/debootstrap/scripts")
        if not (scripts / recipe.suite).exists() and (scripts / "sid").exists():
            # A suite newer than the host's debootstrap (forky on a bookworm host): sid's script, the one
            # newer debootstrap releases link every new Debian suite to.
            cmd.append(str(scripts / "sid"))
        if progress:
            print(f"building {tag}: debootstrap {recipe.suite} + {len(recipe.packages)} packages "
                  "(about a minute)...", flush=True)
        _run(cmd, "debootstrap")
        # Smaller image: package caches, lists and docs are not needed inside a sandbox. A task Dockerfile
        # that installs packages runs `apt-get update` first, as every Dockerfile does.
        for pattern in ["var/cache/apt/archives/*.deb", "var/lib/apt/lists/*", "usr/share/doc/*",
                        "usr/share/man/*", "usr/share/info/*", "var/log/*.log", "var/log/apt/*"]:
            for path in glob.glob(str(rootfs / pattern)):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        _run(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "--exclude=./dev/*",
              "--exclude=./proc/*", "--exclude=./sys/*", "-cf", str(tarball), "."], "tar of the rootfs")
        repository, tag = tag.rsplit(":", 1)
        changes = [f"ENV PATH={IMAGE_ENV_PATH}", "ENV LANG=C.UTF-8", "WORKDIR /root", 'CMD ["bash"]',
                   f"LABEL termagent.recipe_hash={recipe.hash}"]
        client.api.import_image_from_file(str(tarball), repository=repository, tag=tag, changes=changes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _build_dockerfile(recipe: BaseImageRecipe, client: docker.DockerClient, tag: str) -> None:
    try:
        client.images.build(
            path=str(RECIPES_DIR), dockerfile="Dockerfile.base", tag=tag, rm=True, forcerm=True,
            buildargs={"SUITE": recipe.suite, "PACKAGES": " ".join(sorted(set(recipe.packages))),
                       "RECIPE_HASH": recipe.hash},
        )
    except docker.errors.BuildError as e:
        tail = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in e.build_log)[-4000:]
        raise BuildError(f"building {tag} from Dockerfile.base failed: {e.msg}\n{tail}") from e
