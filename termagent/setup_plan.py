"""What `make setup` (scripts/setup.sh) installs on this machine: the decision, as data and as the shell it runs.

    python3 -m termagent.setup_plan detect                 # cpu | gpu (and why, on stderr)
    python3 -m termagent.setup_plan plan --dry-run         # what set-up would install here, nothing installed
    python3 -m termagent.setup_plan plan --kind gpu --json # the same for a chosen kind of machine, as JSON
    python3 -m termagent.setup_plan plan --kind gpu --host tests/fixtures/hosts/ubuntu-22.04.json   # another host
    python3 -m termagent.setup_plan plan --script          # the shell scripts/setup.sh evaluates
    python3 -m termagent.setup_plan apply-patches SITE     # patches/*.patch into Harbor's site-packages

Standard library only, and Python 3.8+: scripts/setup.sh runs it with the host's python3, before the venv exists.
The script it writes runs as the calling user; its apt-get goes through `as_root` (scripts/as_root.sh: root runs
it directly, a user through sudo), which setup.sh defines before evaluating it.

The kind of machine: `gpu` when an NVIDIA driver is loaded (`/proc/driver/nvidia` exists, or `nvidia-smi -L`
succeeds), else `cpu`; TERMAGENT_DEVICE=cpu|gpu forces it. What each kind installs:

  cpu  the project with its `dev` and `remote` (DVC remotes) extras from constraints.txt (torch 2.13.0+cpu).
  gpu  the project with its `dev` and `gpu` extras from constraints-gpu.txt: torch 2.13.0's default Linux wheel
       (a CUDA build, from pip's default index; `torch===2.13.0`, so an installed +cpu build is replaced) and
       vLLM 0.30.0. Opt-in: flash-attn (TERMAGENT_FLASH_ATTN=1) and DeepSpeed (TERMAGENT_DEEPSPEED=1), built
       against that torch. Harbor 0.25.0 (Python >= 3.12) in its own venv, .venv-harbor, with patches/ applied
       where still needed; `harbor` is linked into the project venv's bin/ so it is on the Makefile's PATH.

Why vLLM 0.30.0: TRL 1.16 accepts vLLM 0.22.0 to 0.31.0 (trl/import_utils.py, `is_vllm_available`); 0.31.0
requires transformers < 5.18 while this project runs transformers 5.25; 0.30.0 requires transformers >= 5.10.4
and pins torch==2.13.0, the torch of the CPU run. docs/gpu-setup.md has the whole story.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

TORCH_VERSION = "2.13.0"
VLLM_VERSION = "0.30.0"
TRL_VLLM_RANGE = ("0.22.0", "0.31.0")  # trl 1.16.0, trl/import_utils.py is_vllm_available
# What the `gpu` extra and torch resolve to on a GPU machine (scripts/pin_gpu.py starts from these).
GPU_PINS: dict[str, str] = {"torch": "===" + TORCH_VERSION, "vllm": "==" + VLLM_VERSION}
FLASH_ATTN_VERSION = "2.8.3.post2"
DEEPSPEED_VERSION = "0.19.8"
HARBOR_VERSION = "0.25.0"
HARBOR_PYTHON = (3, 12)
UV_VERSION = "0.9.5"  # a CPython for a venv whose host python3 does not fit (its release fixes which CPython)
# The GPU pins per Python minor version set-up may use (tests/test_pins.py resolves each with pip). A host whose
# python3 is not listed (Ubuntu 22.04: 3.10) gets MANAGED_PYTHON from uv (docs/gpu-setup.md says why uv).
GPU_CONSTRAINTS: dict[str, str] = {"3.11": "constraints-gpu.txt", "3.12": "constraints-gpu-py312.txt"}
MANAGED_PYTHON = "3.12"
PROJECT_PYTHON = (3, 11)  # pyproject.toml requires-python
MIN_DRIVER = 580  # torch 2.13.0's default Linux wheel is built for CUDA 13.0, which needs an NVIDIA driver >= 580

# apt-get as root: `as_root` (scripts/as_root.sh, defined by scripts/setup.sh before it evaluates the plan) runs
# it directly as root and through sudo otherwise; sudo resets the environment, so the frontend goes through env.
AS_ROOT_APT = "as_root env DEBIAN_FRONTEND=noninteractive apt-get"
# The GPU set-up's first check after the install: vLLM and torchaudio load with the installed torch (a torchaudio
# or torchvision wheel built for another torch fails here, not in the first training step).
FIRST_CHECK = "import vllm, torchaudio"

DEVICE_ENV = "TERMAGENT_DEVICE"
FLASH_ENV = "TERMAGENT_FLASH_ATTN"
DEEPSPEED_ENV = "TERMAGENT_DEEPSPEED"


class SetupError(RuntimeError):
    pass


# ---- the kind of machine -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Machine:
    kind: str  # cpu | gpu
    reason: str


def detect(env: Mapping[str, str] | None = None, proc_root: str = "/proc",
           nvidia_smi: str | None = None) -> Machine:
    """cpu or gpu, and why. `env` (default os.environ) may force it with TERMAGENT_DEVICE=cpu|gpu|auto;
    `nvidia_smi`: the program to ask (default: `nvidia-smi` on PATH)."""
    env = os.environ if env is None else env
    forced = (env.get(DEVICE_ENV) or "auto").strip().lower()
    if forced in ("cpu", "gpu"):
        return Machine(forced, f"{DEVICE_ENV}={forced}")
    if forced != "auto":
        raise SetupError(f"{DEVICE_ENV}={env.get(DEVICE_ENV)!r}: must be cpu, gpu or auto (unset: auto)")
    driver = Path(proc_root) / "driver" / "nvidia"
    if driver.exists():
        return Machine("gpu", f"{driver} exists (NVIDIA driver loaded)")
    smi = nvidia_smi or shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi:
        try:
            proc = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Machine("cpu", f"{smi} -L failed ({e})")
        if proc.returncode == 0 and "GPU" in proc.stdout:
            first = proc.stdout.strip().splitlines()[0]
            return Machine("gpu", f"{smi} -L: {first}")
        return Machine("cpu", f"{smi} -L exited {proc.returncode} without listing a GPU")
    return Machine("cpu", f"no {driver} and no nvidia-smi on PATH")


def flag(env: Mapping[str, str], name: str) -> bool:
    value = (env.get(name) or "0").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise SetupError(f"{name}={env.get(name)!r}: must be 1 or 0")


# ---- the host ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Host:
    """What set-up needs to know about a GPU host (probe_host reads it; a JSON file can stand for one)."""

    os: str = "unknown"          # "ubuntu 24.04", from /etc/os-release
    python: str = "{}.{}".format(*sys.version_info[:2])  # the host's python3 (the one running this)
    ensurepip: bool = True       # `python3 -m venv` works (Debian/Ubuntu split it into python3-venv)
    python_headers: bool = True  # Python.h (python3-dev): Triton / inductor compile against it
    compiler: bool = True        # cc: vLLM's compile path (torch.compile, Triton) builds C at run time
    compose: bool = False        # `docker compose` (v2 plugin): Harbor's Docker environment runs it
    driver: str | None = None    # NVIDIA driver version; None: not found

    @property
    def is_ubuntu(self) -> bool:
        return self.os.startswith("ubuntu")


def _os_release(root: str = "/") -> str:
    try:
        text = (Path(root) / "etc" / "os-release").read_text()
    except OSError:
        return "unknown"
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return f"{fields.get('ID', 'unknown').strip(chr(34))} {fields.get('VERSION_ID', '').strip(chr(34))}".strip()


def driver_version(proc_root: str = "/proc", nvidia_smi: str | None = None) -> str | None:
    """The loaded NVIDIA driver's version: /proc/driver/nvidia/version, else `nvidia-smi`."""
    import re

    try:
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+\.[0-9.]+)",
                          (Path(proc_root) / "driver" / "nvidia" / "version").read_text())
        if found:
            return found.group(1)
    except OSError:
        pass
    smi = nvidia_smi or shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, timeout=60, check=False).stdout.split()
            return out[0] if out else None
        except (OSError, subprocess.TimeoutExpired):
            return None
    return None


def probe_host() -> Host:
    import importlib.util
    import sysconfig

    compose = False
    if shutil.which("docker"):
        try:
            compose = subprocess.run(["docker", "compose", "version"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, timeout=60, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            compose = False
    include = sysconfig.get_paths().get("include") or ""
    return Host(os=_os_release(), ensurepip=importlib.util.find_spec("ensurepip") is not None,
                python_headers=(Path(include) / "Python.h").is_file(),
                compiler=bool(shutil.which("cc") or shutil.which("gcc")), compose=compose, driver=driver_version())


def load_host(path: str | Path) -> Host:
    data = json.loads(Path(path).read_text())
    unknown = set(data) - set(Host.__dataclass_fields__)
    if unknown:
        raise SetupError(f"{path}: unknown host fields {sorted(unknown)}")
    return Host(**data)


def check_driver(host: Host) -> None:
    """Refuse a driver the CUDA build of the pinned torch cannot use, before anything is downloaded."""
    if host.driver is None:
        return  # no driver to read (a forced TERMAGENT_DEVICE=gpu, a dry run): the post-install check decides
    try:
        major = int(host.driver.split(".")[0])
    except ValueError:
        raise SetupError(f"cannot read the NVIDIA driver version {host.driver!r}") from None
    if major < MIN_DRIVER:
        raise SetupError(
            f"NVIDIA driver {host.driver} is too old: torch {TORCH_VERSION} (constraints-gpu*.txt) is built for "
            f"CUDA 13.0, which needs a driver >= {MIN_DRIVER}. Install one (Ubuntu: `apt-get install "
            f"nvidia-driver-{MIN_DRIVER}-server`, then reboot; nvidia-smi shows the version) and run set-up again. "
            "Nothing of the GPU stack was installed.")


# ---- the plan ------------------------------------------------------------------------------------------------

@dataclass
class Plan:
    kind: str
    reason: str
    venv: str
    constraints: str                      # the pins file the venv is installed from
    extras: list[str]                     # of the project, `pip install -e '.[...]'`
    torch: str                            # the torch requirement as pip sees it
    packages: dict[str, str]              # name -> version the plan pins explicitly (torch, vllm, opt-ins)
    optional: dict[str, bool]             # opt-ins and whether they are on
    harbor: dict[str, str] | None      # None: not installed (cpu)
    stamp: str                            # what the venv's stamp file holds once installed
    commands: list[str] = field(default_factory=list)  # the shell scripts/setup.sh runs (step 2 onward)
    python: str = "python3"               # what makes the venv: the host's python3, or "uv <version>" (managed)
    apt: list[str] = field(default_factory=list)  # Debian/Ubuntu packages the GPU path adds
    host: dict | None = None              # the GPU host the plan was made for


def plan(kind: str, *, reason: str = "", env: Mapping[str, str] | None = None, venv: str = ".venv",
         harbor_venv: str = ".venv-harbor", host: Host | None = None) -> Plan:
    env = os.environ if env is None else env
    if kind == "cpu":
        return Plan(kind="cpu", reason=reason, venv=venv, constraints="constraints.txt", extras=["dev", "remote"],
                    torch=f"torch=={TORCH_VERSION}+cpu (constraints.txt)", packages={"torch": f"{TORCH_VERSION}+cpu"},
                    optional={}, harbor=None, stamp="", commands=_cpu_commands())
    if kind != "gpu":
        raise SetupError(f"kind must be cpu or gpu, got {kind!r}")
    host = host or probe_host()
    check_driver(host)
    flash, deepspeed = flag(env, FLASH_ENV), flag(env, DEEPSPEED_ENV)
    managed = host.python not in GPU_CONSTRAINTS
    python = MANAGED_PYTHON if managed else host.python
    constraints = GPU_CONSTRAINTS[python]
    apt = []
    if not host.ensurepip:
        apt.append("python3-venv")  # also for the bootstrap venv that holds uv
    if not managed and not host.python_headers:
        apt.append("python3-dev")
    if not host.compiler:
        apt.append("build-essential")
    if not host.compose:
        if not host.is_ubuntu:
            raise SetupError(
                f"`docker compose` (the v2 plugin) is missing and {host.os} is not Ubuntu, whose docker-compose-v2 "
                "package set-up installs: Harbor's Docker environment runs `docker compose`, so every TB2 trial would "
                "error. Install the plugin (Docker's apt repository: docker-compose-plugin) and run set-up again.")
        apt.append("docker-compose-v2")
    packages = {"torch": TORCH_VERSION, "vllm": VLLM_VERSION}
    if flash:
        packages["flash-attn"] = FLASH_ATTN_VERSION
    if deepspeed:
        packages["deepspeed"] = DEEPSPEED_VERSION
    stamp = (f"gpu python={python} {constraints} torch={TORCH_VERSION} vllm={VLLM_VERSION} "
             f"flash-attn={int(flash)} deepspeed={int(deepspeed)}")
    harbor = {"version": HARBOR_VERSION, "venv": harbor_venv, "python": ">={}.{}".format(*HARBOR_PYTHON),
              "constraints": "constraints-harbor.txt",
              "patches": "patches/*.patch", "link": f"{venv}/bin/harbor"}
    return Plan(kind="gpu", reason=reason, venv=venv, constraints=constraints, extras=["dev", "gpu"],
                torch=f"torch{GPU_PINS['torch']} ({constraints}; the default Linux wheel is the CUDA build)",
                packages=packages, optional={"flash-attn": flash, "deepspeed": deepspeed}, harbor=harbor,
                stamp=stamp, commands=_gpu_commands(stamp, flash, deepspeed, harbor_venv, constraints, apt,
                                                    managed, host),
                python=f"uv {UV_VERSION} (CPython {MANAGED_PYTHON})" if managed else f"python3 ({host.python})",
                apt=apt, host=asdict(host))


def _cpu_commands() -> list[str]:
    """Set-up's step 2 as it always was on a CPU machine (same commands, same order)."""
    return [
        'stamp="$VENV/.termagent-installed"',
        'if [ ! -x "$VENV/bin/python" ]; then\n  log "creating $VENV"\n  python3 -m venv "$VENV"\nfi',
        "# constraints.txt pins every package to the versions of the committed run (pyproject.toml keeps ranges).",
        ('if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then\n'
        "  log \"pip install -e '.[dev,remote]' -c constraints.txt (first time ~2 min)\"\n"
        '  "$VENV/bin/pip" install -q --upgrade pip >/dev/null\n'
        "  \"$VENV/bin/pip\" install -q -e '.[dev,remote]' -c constraints.txt\n"
        '  touch "$stamp"\n'
        "fi"),
    ]


def _gpu_commands(stamp: str, flash: bool, deepspeed: bool, harbor_venv: str, constraints: str = GPU_CONSTRAINTS["3.11"],
                  apt: list[str] | None = None, managed: bool = False, host: Host | None = None) -> list[str]:
    q = shlex.quote
    c = q(constraints)
    install = [
        f"  \"$VENV/bin/pip\" install -q --upgrade pip -c {c} >/dev/null",
        f"  \"$VENV/bin/pip\" install -q -e '.[dev,gpu]' -c {c}",
    ]
    if flash:  # built from source against the installed torch (needs the CUDA toolkit's nvcc; long)
        install.append(f'  "$VENV/bin/pip" install -q --no-build-isolation flash-attn=={FLASH_ATTN_VERSION} '
                       f"-c {c}")
    if deepspeed:
        install.append(f'  "$VENV/bin/pip" install -q --no-build-isolation deepspeed=={DEEPSPEED_VERSION} '
                       f"-c {c}")
    first = (f"  \"$VENV/bin/python\" -c {q(FIRST_CHECK)} || {{ echo \"[setup] python -c '{FIRST_CHECK}' failed "
             f"(above): vLLM {VLLM_VERSION} and torchaudio must load with torch {TORCH_VERSION} from {constraints}; a "
             "torchaudio / torchvision wheel built for another torch is the usual cause (docs/gpu-setup.md)\" >&2; "
             "exit 1; }")
    check = ("  \"$VENV/bin/python\" -c 'import sys, torch; sys.exit(0 if torch.version.cuda else "
             "\"torch \" + torch.__version__ + \" is not a CUDA build: set-up installed the wrong torch\")'")
    # A torch that sees no GPU is a failed set-up (the driver was checked before the download; this catches the
    # rest: a driver that is not loaded, a container without the GPU), said here rather than at the first vLLM call.
    sees = ("  \"$VENV/bin/python\" -c 'import sys, torch; torch.cuda.is_available() or sys.exit(\"[setup] torch \" "
            "+ torch.__version__ + \" (CUDA \" + str(torch.version.cuda) + \") sees no GPU: its CUDA 13 build needs an "
            f"NVIDIA driver >= {MIN_DRIVER} (nvidia-smi shows the driver version)\")'")
    apt_cmds = []
    if apt:
        apt_cmds = [(f"# Ubuntu's packages the GPU path needs and this host lacks: {' '.join(apt)} (as root: "
                     "scripts/as_root.sh, sudo for a user who is not root)."),
                    (f'log "apt-get install {" ".join(apt)}"\n'
                     f"{AS_ROOT_APT} update -qq\n"
                     f"{AS_ROOT_APT} install -y -qq --no-install-recommends {' '.join(apt)} >/dev/null")]
    compose = [('docker compose version >/dev/null 2>&1 || { echo "[setup] \\`docker compose\\` (v2) does not run: '
                'Harbor\'s Docker environment needs it (Ubuntu: apt-get install docker-compose-v2)" >&2; exit 1; }')]
    if managed:
        host_python = host.python if host else "?"
        make_venv = (f'if [ ! -x "$VENV/bin/python" ]; then\n'
                     f'  log "python3 is {host_python}, which has no pins: uv {UV_VERSION} installs CPython '
                     f'{MANAGED_PYTHON} for $VENV"\n'
                     '  [ -x .venv-bootstrap/bin/uv ] || { python3 -m venv .venv-bootstrap && '
                     f'.venv-bootstrap/bin/pip install -q uv=={UV_VERSION}; }}\n'
                     f'  .venv-bootstrap/bin/uv python install {MANAGED_PYTHON}\n'
                     f'  .venv-bootstrap/bin/uv venv --seed --python {MANAGED_PYTHON} "$VENV"\n'
                     "fi")
    else:
        make_venv = 'if [ ! -x "$VENV/bin/python" ]; then\n  log "creating $VENV"\n  python3 -m venv "$VENV"\nfi'
    want = MANAGED_PYTHON if managed else (host.python if host else "")
    same_python = (f'if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c \'import sys; print("%d.%d" % '
                   f'sys.version_info[:2])\')" != {q(want)} ]; then\n'
                   f'  log "$VENV is not Python {want}: making it again"\n  rm -rf "$VENV"\nfi') if want else ""
    venv_cmds = [
        *apt_cmds,
        *compose,
        'stamp="$VENV/.termagent-installed"',
        *([same_python] if same_python else []),
        make_venv,
        f"# {constraints}: torch's CUDA build and vLLM, pinned together for this Python (docs/gpu-setup.md).",
        "\n".join([
            (f'if [ "$(cat "$stamp" 2>/dev/null)" != {q(stamp)} ] || [ pyproject.toml -nt "$stamp" ] '
             f'|| [ {c} -nt "$stamp" ]; then'),
            f"  log {q(f'pip install -e .[dev,gpu] -c {constraints} (CUDA torch, vLLM; first time ~10 min)')}",
            *install,
            first,
            check,
            sees,
            f'  printf "%s\\n" {q(stamp)} > "$stamp"',
            "fi",
        ]),
    ]
    hv = q(harbor_venv)
    need_python = "{}.{}".format(*HARBOR_PYTHON)
    harbor_cmds = [
        f"# Harbor {HARBOR_VERSION} (Python >= {need_python}) in its own venv, patches/ applied where still needed.",
        f'harbor_stamp={hv}/.termagent-harbor-installed',
        (f'if [ "$(cat "$harbor_stamp" 2>/dev/null)" != {q("harbor=" + HARBOR_VERSION)} ] '
        '|| [ constraints-harbor.txt -nt "$harbor_stamp" ] '
        '|| [ -n "$(find patches -name \'*.patch\' -newer "$harbor_stamp" 2>/dev/null)" ]; then\n'
        f'  py=$(python3 -m termagent.setup_plan find-python {need_python})\n'
        f'  if [ ! -x {hv}/bin/python ]; then\n'
        '    if [ -n "$py" ]; then\n'
        f'      log "creating {harbor_venv} with $py"\n'
        f'      "$py" -m venv {hv}\n'
        '    else\n'
        f'      log "no Python >= {need_python} on PATH: uv {UV_VERSION} makes {harbor_venv} with a managed CPython"\n'
        '      [ -x .venv-bootstrap/bin/uv ] || { python3 -m venv .venv-bootstrap && '
        f'.venv-bootstrap/bin/pip install -q uv=={UV_VERSION}; }}\n'
        f'      .venv-bootstrap/bin/uv venv --seed --python {need_python} {hv}\n'
        '    fi\n'
        '  fi\n'
        f'  log "pip install harbor=={HARBOR_VERSION} -c constraints-harbor.txt into {harbor_venv}"\n'
        f'  {hv}/bin/python -m pip install -q harbor=={HARBOR_VERSION} -c constraints-harbor.txt\n'
        f'  site=$({hv}/bin/python -c \'import harbor, pathlib; print(pathlib.Path(harbor.__file__).parent.parent)\')\n'
        '  python3 -m termagent.setup_plan apply-patches "$site"\n'
        f'  ln -sfn "$(cd {hv}/bin && pwd)/harbor" "$VENV/bin/harbor"\n'
        f'  printf "%s\\n" {q("harbor=" + HARBOR_VERSION)} > "$harbor_stamp"\n'
        "fi"),
    ]
    return venv_cmds + harbor_cmds


def script(p: Plan) -> str:
    return "\n".join(p.commands) + "\n"


def describe(p: Plan) -> str:
    lines = [f"machine: {p.kind} ({p.reason})" if p.reason else f"machine: {p.kind}"]
    if p.host:
        h = p.host
        lines.append(f"host: {h['os']}, python3 {h['python']}, NVIDIA driver {h['driver'] or 'not found'}, "
                     f"docker compose {'yes' if h['compose'] else 'no'}")
        lines.append(f"apt-get install: {' '.join(p.apt) if p.apt else 'nothing more'}")
    lines += [f"venv {p.venv} ({p.python}): pip install -e '.[{','.join(p.extras)}]' -c {p.constraints}",
              f"  torch: {p.torch}"]
    for name, version in p.packages.items():
        if name != "torch":
            lines.append(f"  {name}=={version}")
    for name, on in p.optional.items():
        if not on:
            env = FLASH_ENV if name == "flash-attn" else DEEPSPEED_ENV
            lines.append(f"  {name}: not installed (opt in with {env}=1)")
    if p.harbor:
        h = p.harbor
        lines.append(f"harbor=={h['version']} in its own venv {h['venv']} (Python {h['python']}), "
                     f"{h['patches']} applied where still needed, linked as {h['link']}")
    else:
        lines.append("harbor: not installed (the CPU profile evaluates with the local backend)")
    return "\n".join(lines)


# ---- helpers the script calls --------------------------------------------------------------------------------

def find_python(minimum: tuple = HARBOR_PYTHON, path: str | None = None) -> str | None:
    """The first python3.N (newest N first) or python3 on PATH whose version is >= `minimum`."""
    names = [f"python3.{n}" for n in range(20, minimum[1] - 1, -1)] + ["python3"]
    for name in names:
        exe = shutil.which(name, path=path)
        if not exe:
            continue
        try:
            out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 timeout=60, check=False).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if len(out) == 2 and (int(out[0]), int(out[1])) >= tuple(minimum):
            return exe
    return None


def apply_patches(site: str | Path, patches: list[Path]) -> dict[str, str]:
    """Apply each patch (-p1) to `site` unless it is already applied. patch name -> applied | already applied.
    A patch that neither applies nor is already in place is an error naming it."""
    if shutil.which("patch") is None:
        raise SetupError("the `patch` program is not installed (apt-get install patch)")
    done: dict[str, str] = {}
    def run(p: Path, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["patch", "-p1", "-d", str(site), "-i", str(p), "--batch", *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)

    for p in patches:
        if run(p, "--dry-run", "--reverse", "--force").returncode == 0:
            done[p.name] = "already applied"
            continue
        trial = run(p, "--dry-run", "--forward")
        if trial.returncode != 0:
            raise SetupError(f"{p}: does not apply to {site} (is Harbor {HARBOR_VERSION} installed there?):\n"
                             f"{trial.stdout[-2000:]}")
        result = run(p, "--forward")
        if result.returncode != 0:
            raise SetupError(f"{p}: patch failed on {site}:\n{result.stdout[-2000:]}")
        done[p.name] = "applied"
    return done


# ---- command line --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m termagent.setup_plan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("detect", help="print cpu or gpu (the reason on stderr)")
    pp = sub.add_parser("plan", help="what set-up installs")
    pp.add_argument("--kind", choices=["auto", "cpu", "gpu"], default="auto")
    pp.add_argument("--venv", default=os.environ.get("VENV", ".venv"))
    pp.add_argument("--host", dest="host_file", default=None,
                    help="a GPU host described as JSON (termagent.setup_plan.Host fields) instead of this one")
    out = pp.add_mutually_exclusive_group()
    out.add_argument("--dry-run", action="store_true", help="print the plan and the commands (the default)")
    out.add_argument("--json", action="store_true", help="the plan as JSON")
    out.add_argument("--script", action="store_true", help="only the shell scripts/setup.sh evaluates")
    fp = sub.add_parser("find-python", help="a python >= MAJOR.MINOR on PATH (empty if none)")
    fp.add_argument("version", default="{}.{}".format(*HARBOR_PYTHON), nargs="?")
    ap_ = sub.add_parser("apply-patches", help="apply patches/*.patch to Harbor's site-packages")
    ap_.add_argument("site")
    ap_.add_argument("--patches", default=str(Path(__file__).resolve().parent.parent / "patches"))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "detect":
            machine = detect()
            print(f"[setup] machine: {machine.kind} ({machine.reason})", file=sys.stderr)
            print(machine.kind)
        elif args.cmd == "plan":
            machine = detect() if args.kind == "auto" else Machine(args.kind, "--kind " + args.kind)
            host = load_host(args.host_file) if args.host_file else None
            p = plan(machine.kind, reason=machine.reason, venv=args.venv, host=host)
            if args.json:
                print(json.dumps(asdict(p), indent=2))
            elif args.script:
                sys.stdout.write(script(p))
            else:
                print(describe(p))
                print("\n# the commands (not run: dry run)\n" + script(p), end="")
        elif args.cmd == "find-python":
            major, minor = (int(x) for x in args.version.split("."))
            print(find_python((major, minor)) or "")
        elif args.cmd == "apply-patches":
            patches = sorted(Path(args.patches).glob("*.patch"))
            for name, what in apply_patches(args.site, patches).items():
                print(f"[setup] {name}: {what}", file=sys.stderr)
    except SetupError as e:
        print(f"setup: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
