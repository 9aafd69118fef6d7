"""What `make setup` (scripts/setup.sh) installs on this machine: the decision, as data and as the shell it runs.

    python3 -m termagent.setup_plan detect                 # cpu | gpu (and why, on stderr)
    python3 -m termagent.setup_plan plan --dry-run         # what set-up would install here, nothing installed
    python3 -m termagent.setup_plan plan --kind gpu --json # the same for a chosen kind of machine, as JSON
    python3 -m termagent.setup_plan plan --script          # the shell scripts/setup.sh evaluates
    python3 -m termagent.setup_plan apply-patches SITE     # patches/*.patch into Harbor's site-packages

Standard library only, and Python 3.8+: scripts/setup.sh runs it with the host's python3, before the venv exists.

The kind of machine: `gpu` when an NVIDIA driver is loaded (`/proc/driver/nvidia` exists, or `nvidia-smi -L`
succeeds), else `cpu`; TERMAGENT_DEVICE=cpu|gpu forces it. What each kind installs:

  cpu  the project with its `dev` extra from constraints.txt (torch 2.13.0+cpu): exactly what set-up always did.
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
UV_VERSION = "0.9.5"  # only to make Harbor's venv on a host with no Python >= 3.12 (uv fetches a CPython)

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


def plan(kind: str, *, reason: str = "", env: Mapping[str, str] | None = None, venv: str = ".venv",
         harbor_venv: str = ".venv-harbor") -> Plan:
    env = os.environ if env is None else env
    if kind == "cpu":
        return Plan(kind="cpu", reason=reason, venv=venv, constraints="constraints.txt", extras=["dev"],
                    torch=f"torch=={TORCH_VERSION}+cpu (constraints.txt)", packages={"torch": f"{TORCH_VERSION}+cpu"},
                    optional={}, harbor=None, stamp="", commands=_cpu_commands())
    if kind != "gpu":
        raise SetupError(f"kind must be cpu or gpu, got {kind!r}")
    flash, deepspeed = flag(env, FLASH_ENV), flag(env, DEEPSPEED_ENV)
    packages = {"torch": TORCH_VERSION, "vllm": VLLM_VERSION}
    if flash:
        packages["flash-attn"] = FLASH_ATTN_VERSION
    if deepspeed:
        packages["deepspeed"] = DEEPSPEED_VERSION
    stamp = f"gpu torch={TORCH_VERSION} vllm={VLLM_VERSION} flash-attn={int(flash)} deepspeed={int(deepspeed)}"
    harbor = {"version": HARBOR_VERSION, "venv": harbor_venv, "python": ">={}.{}".format(*HARBOR_PYTHON),
              "constraints": "constraints-harbor.txt",
              "patches": "patches/*.patch", "link": f"{venv}/bin/harbor"}
    return Plan(kind="gpu", reason=reason, venv=venv, constraints="constraints-gpu.txt", extras=["dev", "gpu"],
                torch=f"torch{GPU_PINS['torch']} (constraints-gpu.txt; the default Linux wheel is the CUDA build)",
                packages=packages, optional={"flash-attn": flash, "deepspeed": deepspeed}, harbor=harbor,
                stamp=stamp, commands=_gpu_commands(stamp, flash, deepspeed, harbor_venv))


def _cpu_commands() -> list[str]:
    """Set-up's step 2 as it always was on a CPU machine (same commands, same order)."""
    return [
        'stamp="$VENV/.termagent-installed"',
        'if [ ! -x "$VENV/bin/python" ]; then\n  log "creating $VENV"\n  python3 -m venv "$VENV"\nfi',
        "# constraints.txt pins every package to the versions of the committed run (pyproject.toml keeps ranges).",
        ('if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then\n'
        "  log \"pip install -e '.[dev]' -c constraints.txt (first time ~2 min)\"\n"
        '  "$VENV/bin/pip" install -q --upgrade pip >/dev/null\n'
        "  \"$VENV/bin/pip\" install -q -e '.[dev]' -c constraints.txt\n"
        '  touch "$stamp"\n'
        "fi"),
    ]


def _gpu_commands(stamp: str, flash: bool, deepspeed: bool, harbor_venv: str) -> list[str]:
    q = shlex.quote
    install = [
        "  \"$VENV/bin/pip\" install -q --upgrade pip >/dev/null",
        "  \"$VENV/bin/pip\" install -q -e '.[dev,gpu]' -c constraints-gpu.txt",
    ]
    if flash:  # built from source against the installed torch (needs the CUDA toolkit's nvcc; long)
        install.append(f'  "$VENV/bin/pip" install -q --no-build-isolation flash-attn=={FLASH_ATTN_VERSION} '
                       "-c constraints-gpu.txt")
    if deepspeed:
        install.append(f'  "$VENV/bin/pip" install -q --no-build-isolation deepspeed=={DEEPSPEED_VERSION} '
                       "-c constraints-gpu.txt")
    check = ("  \"$VENV/bin/python\" -c 'import sys, torch; sys.exit(0 if torch.version.cuda else "
             "\"torch \" + torch.__version__ + \" is not a CUDA build: set-up installed the wrong torch\")'")
    # torch 2.13.0's default Linux wheel is built for CUDA 13 (constraints-gpu.txt: cuda-toolkit 13.0), which
    # needs an NVIDIA driver >= 580: an older driver leaves torch without a GPU, said here rather than at train().
    sees = ("  \"$VENV/bin/python\" -c 'import torch; torch.cuda.is_available() or print(\"[setup] warning: torch \" "
            "+ torch.__version__ + \" (CUDA \" + str(torch.version.cuda) + \") sees no GPU; its CUDA 13 build needs "
            "an NVIDIA driver >= 580 (nvidia-smi shows the driver version)\")'")
    venv_cmds = [
        'stamp="$VENV/.termagent-installed"',
        'if [ ! -x "$VENV/bin/python" ]; then\n  log "creating $VENV"\n  python3 -m venv "$VENV"\nfi',
        "# constraints-gpu.txt: torch's CUDA build and vLLM, pinned together (docs/gpu-setup.md).",
        "\n".join([
            (f'if [ "$(cat "$stamp" 2>/dev/null)" != {q(stamp)} ] || [ pyproject.toml -nt "$stamp" ] '
             '|| [ constraints-gpu.txt -nt "$stamp" ]; then'),
            f"  log {q('pip install -e .[dev,gpu] -c constraints-gpu.txt (CUDA torch, vLLM; first time ~10 min)')}",
            *install,
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
        f'      "$VENV/bin/pip" install -q uv=={UV_VERSION}\n'
        f'      "$VENV/bin/uv" venv --seed --python {need_python} {hv}\n'
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
    lines = [f"machine: {p.kind} ({p.reason})" if p.reason else f"machine: {p.kind}",
             f"venv {p.venv}: pip install -e '.[{','.join(p.extras)}]' -c {p.constraints}",
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
            p = plan(machine.kind, reason=machine.reason, venv=args.venv)
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
