"""Set-up's decision (termagent/setup_plan.py, run by scripts/setup.sh): what each kind of machine gets.

- `scripts/setup.sh --dry-run` with TERMAGENT_DEVICE=gpu / cpu prints what it would install and installs nothing:
  on a GPU machine torch's CUDA build and the pinned vLLM from constraints-gpu.txt, Harbor in its own venv with
  patches/; on a CPU machine the CPU pins of constraints.txt, nothing else (the same commands as ever).
- the kind comes from a real /proc-like tree (driver/nvidia) or a real `nvidia-smi` program on PATH.
- constraints-gpu.txt pins the torch and vLLM the plan names, vLLM inside the range the installed TRL accepts
  (read from TRL's own source), and pip, in this venv (torch 2.13.0+cpu installed), replaces the CPU torch.
- patches/ are applied to an unpacked Harbor wheel once, and a second run leaves them alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from termagent import setup_plan

REPO = Path(__file__).resolve().parents[1]
CPU_INSTALL = "\"$VENV/bin/pip\" install -q -e '.[dev,remote]' -c constraints.txt"


HOSTS = REPO / "tests" / "fixtures" / "hosts"  # GPU hosts as set-up sees them (termagent.setup_plan.Host)
DEBIAN_GPU = ["--host", str(HOSTS / "debian-12-gpu.json")]


def dry_run(device: str, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERMAGENT_")}
    env.update(TERMAGENT_DEVICE=device, VENV=".venv-dry-run-never-made", **extra_env)
    return subprocess.run(["bash", "scripts/setup.sh", "--dry-run", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_setup_dry_run_on_a_gpu_machine_names_the_cuda_stack_and_installs_nothing():
    out = dry_run("gpu", *DEBIAN_GPU)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "machine: gpu (TERMAGENT_DEVICE=gpu)" in text
    assert "-c constraints-gpu.txt" in text and "'.[dev,gpu]'" in text
    assert f"torch==={setup_plan.TORCH_VERSION}" in text and "CUDA" in text
    assert f"vllm=={setup_plan.VLLM_VERSION}" in text
    assert "flash-attn: not installed (opt in with TERMAGENT_FLASH_ATTN=1)" in text
    assert f"harbor=={setup_plan.HARBOR_VERSION} in its own venv .venv-harbor (Python >=3.12)" in text
    assert "apply-patches" in text and 'ln -sfn' in text
    assert "constraints.txt " not in text.replace("constraints-gpu.txt", "")  # never the CPU pins
    assert not (REPO / ".venv-dry-run-never-made").exists()  # a dry run installs nothing


def test_setup_dry_run_on_a_cpu_machine_is_the_cpu_set_up_as_it_always_was():
    out = dry_run("cpu")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "machine: cpu (TERMAGENT_DEVICE=cpu)" in text
    assert CPU_INSTALL in text
    assert "torch==2.13.0+cpu (constraints.txt)" in text
    for gpu_only in ("vllm", "constraints-gpu", "harbor==", ".venv-harbor", "flash-attn", "apply-patches"):
        assert gpu_only not in text, gpu_only
    assert "harbor: not installed" in text


def test_the_cpu_commands_are_the_ones_set_up_always_ran():
    # the step-2 block scripts/setup.sh had before the GPU path existed, line for line
    before = """stamp="$VENV/.termagent-installed"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
# constraints.txt pins every package to the versions of the committed run (pyproject.toml keeps ranges).
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  log "pip install -e '.[dev,remote]' -c constraints.txt (first time ~2 min)"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e '.[dev,remote]' -c constraints.txt
  touch "$stamp"
fi
"""
    assert setup_plan.script(setup_plan.plan("cpu")) == before


def test_the_plans_as_json_for_both_kinds():
    plans = {}
    for kind in ("cpu", "gpu"):
        out = subprocess.run([sys.executable, "-m", "termagent.setup_plan", "plan", "--kind", kind, "--json",
                              *(DEBIAN_GPU if kind == "gpu" else [])],
                             cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if not k.startswith("TERMAGENT_")})
        plans[kind] = json.loads(out.stdout)
    cpu, gpu = plans["cpu"], plans["gpu"]
    assert cpu["constraints"] == "constraints.txt" and cpu["extras"] == ["dev", "remote"] and cpu["harbor"] is None
    assert cpu["packages"] == {"torch": "2.13.0+cpu"}
    assert gpu["constraints"] == "constraints-gpu.txt" and gpu["extras"] == ["dev", "gpu"]
    assert gpu["packages"] == {"torch": setup_plan.TORCH_VERSION, "vllm": setup_plan.VLLM_VERSION}
    assert gpu["optional"] == {"flash-attn": False, "deepspeed": False}
    assert gpu["harbor"]["venv"] == ".venv-harbor" and gpu["harbor"]["version"] == "0.25.0"
    assert gpu["harbor"]["constraints"] == "constraints-harbor.txt"
    assert gpu["stamp"] != cpu["stamp"]  # a venv set up for one kind is reinstalled for the other


def test_opt_ins_add_flash_attention_and_deepspeed_built_against_the_installed_torch():
    host = setup_plan.load_host(HOSTS / "debian-12-gpu.json")
    p = setup_plan.plan("gpu", env={"TERMAGENT_FLASH_ATTN": "1", "TERMAGENT_DEEPSPEED": "1"}, host=host)
    text = setup_plan.script(p)
    assert f"--no-build-isolation flash-attn=={setup_plan.FLASH_ATTN_VERSION}" in text
    assert f"--no-build-isolation deepspeed=={setup_plan.DEEPSPEED_VERSION}" in text
    assert "flash-attn=1 deepspeed=1" in p.stamp
    with pytest.raises(setup_plan.SetupError, match="TERMAGENT_FLASH_ATTN='maybe'"):
        setup_plan.plan("gpu", env={"TERMAGENT_FLASH_ATTN": "maybe"}, host=host)


def _program(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_detect_reads_the_driver_tree_nvidia_smi_and_the_override(tmp_path):
    proc = tmp_path / "proc"
    (proc / "driver").mkdir(parents=True)
    bare = tmp_path / "bin"
    bare.mkdir()
    # no driver tree and no nvidia-smi on PATH: cpu
    machine = setup_plan.detect({"PATH": str(bare)}, proc_root=str(proc))
    assert machine.kind == "cpu" and "no nvidia-smi" in machine.reason
    (proc / "driver" / "nvidia").mkdir()
    machine = setup_plan.detect({}, proc_root=str(proc))
    assert machine.kind == "gpu" and "driver/nvidia exists" in machine.reason
    (proc / "driver" / "nvidia").rmdir()
    smi = _program(bare / "nvidia-smi", 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n')
    machine = setup_plan.detect({}, proc_root=str(proc), nvidia_smi=str(smi))
    assert machine.kind == "gpu" and "H100" in machine.reason
    broken = _program(tmp_path / "nvidia-smi-broken", 'echo "NVIDIA-SMI has failed"; exit 9\n')
    machine = setup_plan.detect({}, proc_root=str(proc), nvidia_smi=str(broken))
    assert machine.kind == "cpu" and "exited 9" in machine.reason
    assert setup_plan.detect({"TERMAGENT_DEVICE": "cpu"}, proc_root=str(proc), nvidia_smi=str(smi)).kind == "cpu"
    assert setup_plan.detect({"TERMAGENT_DEVICE": "GPU"}, proc_root=str(proc)).kind == "gpu"
    with pytest.raises(setup_plan.SetupError, match="TERMAGENT_DEVICE='tpu': must be cpu, gpu or auto"):
        setup_plan.detect({"TERMAGENT_DEVICE": "tpu"})


def test_find_python_takes_the_first_new_enough_python_on_path(tmp_path):
    here = "{}.{}".format(*sys.version_info[:2])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / f"python{here}").symlink_to(sys.executable)
    found = setup_plan.find_python(tuple(sys.version_info[:2]), path=str(bin_dir))
    assert found == str(bin_dir / f"python{here}")
    newer = (sys.version_info[0], sys.version_info[1] + 1)
    assert setup_plan.find_python(newer, path=str(bin_dir)) is None  # only this python: too old


def _constraints(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(===|==)(\S+)$", line)
        if m:
            pins[m.group(1).lower()] = m.group(2) + m.group(3)
    return pins


def test_constraints_harbor_pins_the_harbor_the_plan_installs():
    pins = _constraints(REPO / "constraints-harbor.txt")
    assert pins["harbor"] == "==" + setup_plan.HARBOR_VERSION and "litellm" in pins
    assert "torch" not in pins and "termagent" not in pins  # Harbor's env holds Harbor only


def test_constraints_gpu_pins_what_the_plan_says_inside_trls_vllm_range():
    from packaging.version import Version

    pins = _constraints(REPO / "constraints-gpu.txt")
    assert pins["torch"] == "===" + setup_plan.TORCH_VERSION  # `===`: 2.13.0+cpu does not satisfy it
    assert pins["vllm"] == "==" + setup_plan.VLLM_VERSION
    cpu = _constraints(REPO / "constraints.txt")
    for name in ("trl", "transformers", "peft", "datasets", "accelerate"):  # the training stack of the run
        assert pins[name] == cpu[name], name
    # the range TRL itself accepts, read from the installed TRL's source (trl/import_utils.py)
    import importlib.util

    source = (Path(importlib.util.find_spec("trl").origin).parent / "import_utils.py").read_text()
    low, high = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source).groups()
    assert (low, high) == setup_plan.TRL_VLLM_RANGE
    assert Version(low) <= Version(setup_plan.VLLM_VERSION) <= Version(high)


@pytest.mark.slow
def test_pip_replaces_the_cpu_torch_with_the_cuda_build_under_constraints_gpu(tmp_path):
    """In this venv torch 2.13.0+cpu is installed. With constraints.txt's `==` rule it would stay (the bug); with
    constraints-gpu.txt pip selects the plain 2.13.0 wheel (the CUDA build). Metadata only, nothing installed."""
    import torch

    if "+cpu" not in torch.__version__:
        pytest.skip(f"this venv's torch is {torch.__version__}, not the CPU build the test starts from")
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet", "--report",
                           str(report), "torch", "-c", str(REPO / "constraints-gpu.txt")],
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0 and ("No matching distribution" in proc.stderr or "Could not" in proc.stderr):
        pytest.skip(f"no package index reachable: {proc.stderr.strip().splitlines()[-1:]}")
    assert proc.returncode == 0, proc.stderr
    installs = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert installs == {"torch": setup_plan.TORCH_VERSION}


# -- patches/ on Harbor's own files -----------------------------------------------------------------------------
CACHE = Path.home() / ".cache" / "termagent" / "wheels"


@pytest.fixture
def harbor_site(tmp_path):
    wheels = sorted(CACHE.glob(f"harbor-{setup_plan.HARBOR_VERSION}-*.whl"))
    if not wheels:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--python-version", "3.12",
                        "--only-binary=:all:", f"harbor=={setup_plan.HARBOR_VERSION}", "-d", str(CACHE)],
                       capture_output=True, text=True, timeout=300, check=False)
        wheels = sorted(CACHE.glob(f"harbor-{setup_plan.HARBOR_VERSION}-*.whl"))
        if not wheels:
            pytest.skip("cannot fetch the Harbor wheel (no package index)")
    if shutil.which("patch") is None:
        pytest.skip("the `patch` program is not installed")
    with zipfile.ZipFile(wheels[0]) as whl:
        whl.extractall(tmp_path / "site-packages")
    return tmp_path / "site-packages"


def test_apply_patches_applies_once_then_leaves_them(harbor_site):
    lite_llm = harbor_site / "harbor" / "llms" / "lite_llm.py"
    assert "longer than the maximum model length" not in lite_llm.read_text()
    out = subprocess.run([sys.executable, "-m", "termagent.setup_plan", "apply-patches", str(harbor_site)],
                         cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "0001-litellm-vllm-decoder-prompt-context-error.patch: applied" in out.stderr
    assert "longer than the maximum model length" in lite_llm.read_text()
    patched = lite_llm.read_bytes()
    again = subprocess.run([sys.executable, "-m", "termagent.setup_plan", "apply-patches", str(harbor_site)],
                           cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    assert "already applied" in again.stderr
    assert lite_llm.read_bytes() == patched  # not applied twice


def test_a_patch_that_does_not_fit_is_an_error_naming_it(tmp_path):
    site = tmp_path / "site"
    (site / "harbor" / "llms").mkdir(parents=True)
    (site / "harbor" / "llms" / "lite_llm.py").write_text("something else entirely\n")
    patches = sorted((REPO / "patches").glob("*.patch"))
    with pytest.raises(setup_plan.SetupError, match=r"0001-.*\.patch: does not apply to"):
        setup_plan.apply_patches(site, patches)


# -- each kind of GPU host (issue 35, defect 2): the real script, --dry-run with a recorded host ------------------
def gpu_dry_run(host: str) -> subprocess.CompletedProcess:
    return dry_run("gpu", "--host", str(HOSTS / f"{host}.json"))


def the_script(host: str) -> str:
    out = subprocess.run([sys.executable, "-m", "termagent.setup_plan", "plan", "--kind", "gpu", "--script",
                          "--host", str(HOSTS / f"{host}.json")], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=60)
    subprocess.run(["bash", "-n"], input=out.stdout, text=True, check=True)  # the shell set-up evaluates parses
    return out.stdout


def test_ubuntu_22_04_gets_a_managed_python_3_12_venv_compose_and_a_compiler():
    out = gpu_dry_run("ubuntu-22.04")  # python3 3.10: below requires-python, no pins
    assert out.returncode == 0, out.stderr
    assert "apt-get install: python3-venv build-essential docker-compose-v2" in out.stdout
    assert "(uv 0.9.5 (CPython 3.12)): pip install -e '.[dev,gpu]' -c constraints-gpu-py312.txt" in out.stdout
    script = the_script("ubuntu-22.04")
    assert "apt-get install -y -qq --no-install-recommends python3-venv build-essential docker-compose-v2" in script
    assert ".venv-bootstrap/bin/pip install -q uv==0.9.5" in script
    assert '.venv-bootstrap/bin/uv venv --seed --python 3.12 "$VENV"' in script
    assert "python3 -m venv \"$VENV\"" not in script  # never a 3.10 venv
    assert "docker compose version" in script
    assert "-c constraints-gpu-py312.txt" in script and "-c constraints-gpu.txt" not in script


def test_ubuntu_24_04_uses_its_python_3_12_with_the_3_12_pins():
    out = gpu_dry_run("ubuntu-24.04")
    assert out.returncode == 0, out.stderr
    assert "apt-get install: python3-venv python3-dev build-essential docker-compose-v2" in out.stdout
    assert "(python3 (3.12)): pip install -e '.[dev,gpu]' -c constraints-gpu-py312.txt" in out.stdout
    script = the_script("ubuntu-24.04")
    assert 'python3 -m venv "$VENV"' in script and "uv python install" not in script
    assert "!= 3.12 ]" in script  # a venv of another Python (an earlier set-up) is made again


def test_a_debian_gpu_host_with_python_3_11_keeps_constraints_gpu():
    out = gpu_dry_run("debian-12-gpu")
    assert out.returncode == 0, out.stderr
    assert "apt-get install: nothing more" in out.stdout
    assert "-c constraints-gpu.txt" in the_script("debian-12-gpu")


def test_an_old_driver_is_refused_before_anything_is_downloaded():
    out = gpu_dry_run("ubuntu-24.04-driver-550")
    assert out.returncode != 0
    assert "NVIDIA driver 550.163.01 is too old" in out.stderr and ">= 580" in out.stderr
    assert "pip install" not in out.stdout


def test_no_compose_on_a_host_set_up_cannot_give_it_one_is_refused():
    out = gpu_dry_run("debian-12-no-compose")
    assert out.returncode != 0 and "docker compose" in out.stderr and "docker-compose-plugin" in out.stderr


def test_set_up_stops_when_the_plan_refuses(tmp_path):
    """scripts/setup.sh must not `eval "$(plan)"` (that swallows the refusal): run its step 2 for real with a
    driver that is too old, on a PATH whose nvidia-smi reports it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _program(bin_dir / "nvidia-smi", 'case "$1" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3";; '
                                     '*) echo "550.163.01";; esac\n')
    step2 = REPO / "scripts" / "setup.sh"
    text = step2.read_text()
    body = text[text.index("kind=$(python3"):text.index("# 3. A running Docker engine.")]
    script = tmp_path / "step2.sh"
    script.write_text("set -euo pipefail\nlog() { echo \"[setup] $*\"; }\n" + body + "echo REACHED-INSTALL\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERMAGENT_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", VENV=str(tmp_path / "venv"), PYTHONPATH=str(REPO))
    out = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode != 0 and "REACHED-INSTALL" not in out.stdout
    assert "NVIDIA driver 550.163.01 is too old" in out.stderr
    assert not (tmp_path / "venv").exists()


def test_driver_version_is_read_from_the_proc_tree(tmp_path):
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"
        "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
    assert setup_plan.driver_version(str(tmp_path), nvidia_smi="/nonexistent") == "580.95.05"


def test_every_python_set_up_may_use_has_pins():
    """A host python3 with pins uses them; any other gets MANAGED_PYTHON, which must have pins too."""
    assert setup_plan.MANAGED_PYTHON in setup_plan.GPU_CONSTRAINTS
    for python, name in setup_plan.GPU_CONSTRAINTS.items():
        assert (REPO / name).is_file(), name
        assert tuple(int(x) for x in python.split(".")) >= setup_plan.PROJECT_PYTHON


# ---- set-up as a user who is not root (issue 43): apt-get and dockerd through scripts/as_root.sh ----------------

def test_every_apt_get_of_set_up_runs_through_as_root():
    """The plan (every host kind it accepts) and setup.sh's own step 1 call apt-get only through `as_root`, with
    the frontend passed through env (sudo resets the environment); neither runs `sudo` itself."""
    scripts = [the_script(h) for h in ("ubuntu-22.04", "ubuntu-24.04", "debian-12-gpu")]
    scripts.append((REPO / "scripts" / "setup.sh").read_text())
    for text in scripts:
        calls = [line.strip() for line in text.splitlines() if re.search(r"apt-get (update -qq|install -y)", line)]
        for call in calls:
            assert call.startswith("as_root env DEBIAN_FRONTEND=noninteractive apt-get "), call
        assert not [line for line in text.splitlines() if re.search(r"(^|[;&|(]\s*)sudo\s", line.strip())]
    assert len([c for c in the_script("ubuntu-22.04").splitlines() if "apt-get" in c and "as_root" in c]) == 2
    assert ". scripts/as_root.sh" in scripts[-1]


def _as(user: str, command: str, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", "env", f"PATH={path}", "bash", "-c", command], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None,
                                reason="runs scripts as another user: needs root and runuser")


@needs_root
def test_as_root_runs_directly_for_root_through_sudo_for_a_user_and_stops_without_sudo():
    import tempfile

    source = ". scripts/as_root.sh; as_root env DEBIAN_FRONTEND=noninteractive apt-get --version"
    as_root_user = subprocess.run(["bash", "-c", ". scripts/as_root.sh; as_root id -u"], cwd=REPO,
                                  capture_output=True, text=True, check=True)
    assert as_root_user.stdout.strip() == "0"  # root: no sudo in the way
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if shutil.which("sudo", path=system) is None:  # this machine has no sudo: a user is told what to do
        out = _as("nobody", source, system)
        assert out.returncode == 1
        assert "needs root for: env DEBIAN_FRONTEND=noninteractive apt-get --version" in out.stderr
        assert "install sudo" in out.stderr and "set-up-as-a-user-who-is-not-root" in out.stderr
    # with a sudo on PATH, a user's root commands go through it (a sudo that says what it was asked to run)
    bin_dir = Path(tempfile.mkdtemp(prefix="as-root-"))
    try:
        bin_dir.chmod(0o755)
        _program(bin_dir / "sudo", 'echo "sudo $*"\n').chmod(0o755)
        out = _as("nobody", source, f"{bin_dir}:{system}")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "sudo env DEBIAN_FRONTEND=noninteractive apt-get --version"
    finally:
        shutil.rmtree(bin_dir)


@needs_root
def test_dockerd_as_a_user_without_access_or_sudo_says_how_to_get_both():
    out = _as("nobody", "bash scripts/dockerd.sh", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    if shutil.which("sudo") is not None:
        pytest.skip("this machine has sudo: the no-sudo message cannot be shown")
    assert out.returncode == 1
    assert "usermod -aG docker nobody" in out.stderr and "install sudo" in out.stderr


def test_the_gpu_set_ups_first_check_imports_vllm_and_torchaudio_and_fails_clearly():
    """After the install, `import vllm, torchaudio` runs before any other check; run for real against this
    (CPU) venv, which has no vLLM, the check stops set-up with a message naming it."""
    script = the_script("debian-12-gpu")
    first = next(line for line in script.splitlines() if "import vllm, torchaudio" in line)
    assert script.index(first) < script.index("torch.version.cuda") < script.index("torch.cuda.is_available()")
    assert script.index("pip\" install -q -e '.[dev,gpu]'") < script.index(first)
    venv = Path(sys.executable).parent.parent
    out = subprocess.run(["bash", "-c", first.strip()], cwd=REPO, env={**os.environ, "VENV": str(venv)},
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1
    assert "[setup] python -c 'import vllm, torchaudio' failed" in out.stderr
    assert f"torch {setup_plan.TORCH_VERSION}" in out.stderr and "constraints-gpu.txt" in out.stderr
