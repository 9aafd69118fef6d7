"""A real DVC remote: the pipeline's kinds of outputs (a LoRA adapter folder, a dataset file) pushed over SSH to an
sshd this test starts on 127.0.0.1 (OpenSSH, key auth with keys generated here, host key checked against a
known_hosts file), pulled into a git clone, and `dvc status -c` in sync on both sides. Credentials go to
.dvc/config.local (`dvc remote modify --local`), never to the committed .dvc/config. Needs the `remote` extra
(dvc-ssh) and Debian's openssh-server (scripts/setup.sh installs both).

    python -m pytest tests/test_dvc_remote.py -q
"""

from __future__ import annotations

import configparser
import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
DVC = Path(sys.executable).parent / "dvc"

# Two stages shaped like the project's: a base model rebuilt from a pinned seed (`push: false`, as models/base), and a
# training stage whose outputs are an adapter folder and a dataset file.
PIPELINE = """\
import json, sys
from pathlib import Path
import torch
from safetensors.torch import save_file

if sys.argv[1] == "base":
    torch.manual_seed(0)  # the pinned revision: the same bytes on every machine
    Path("models/base").mkdir(parents=True, exist_ok=True)
    save_file({"q_proj.weight": torch.randn(64, 64)}, "models/base/model.safetensors")
else:
    torch.manual_seed(3)
    Path("models/sft").mkdir(parents=True, exist_ok=True)
    save_file({"base_model.model.q_proj.lora_A.weight": torch.randn(8, 64),
               "base_model.model.q_proj.lora_B.weight": torch.zeros(64, 8)}, "models/sft/adapter_model.safetensors")
    Path("models/sft/adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    Path("data/datasets").mkdir(parents=True, exist_ok=True)
    Path("data/datasets/rft_sft.jsonl").write_text(
        "".join(json.dumps({"messages": [{"role": "user", "content": f"task {i}"}]}) + "\\n" for i in range(50)))
"""

DVC_YAML = """\
stages:
  base_model:
    cmd: python pipeline.py base
    deps: [pipeline.py]
    outs:
      - models/base:
          push: false
  sft:
    cmd: python pipeline.py sft
    deps: [pipeline.py, models/base]
    outs:
      - models/sft
      - data/datasets/rft_sft.jsonl
"""


def run(args: list, cwd: Path, env: dict) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sshd(tmp_path):
    """An OpenSSH server on 127.0.0.1: (port, user, client key, a HOME whose known_hosts holds its host key)."""
    assert SSHD.is_file(), f"{SSHD} missing: scripts/setup.sh installs openssh-server (apt-get install openssh-server)"
    server = tmp_path / "sshd"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    server.mkdir()
    for key in (server / "host_key", home / ".ssh" / "id_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    shutil.copy(home / ".ssh" / "id_ed25519.pub", server / "authorized_keys")
    port = free_port()
    host_key = (server / "host_key.pub").read_text().split()
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    (server / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {server / 'host_key'}
PidFile {server / 'sshd.pid'}
AuthorizedKeysFile {server / 'authorized_keys'}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
""")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # the privilege-separation folder sshd wants when run as root
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", server / "sshd_config"], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # until it listens (it exits with its reason otherwise)
            assert proc.poll() is None, f"sshd exited: {proc.stderr.read()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield port, getpass.getuser(), home / ".ssh" / "id_ed25519", home
    finally:
        proc.terminate()
        proc.wait()


@pytest.mark.slow
def test_push_pull_over_ssh_to_a_real_sshd(sshd, tmp_path):
    port, user, key, home = sshd
    env = {**os.environ, "HOME": str(home), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": f"{DVC.parent}{os.pathsep}{os.environ['PATH']}"}
    store = tmp_path / "store"
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "pipeline.py").write_text(PIPELINE)
    (origin / "dvc.yaml").write_text(DVC_YAML)
    run(["git", "init", "-q"], origin, env)
    run([DVC, "init", "-q"], origin, env)
    run([DVC, "config", "core.analytics", "false"], origin, env)
    run([DVC, "remote", "add", "-d", "storage", f"ssh://127.0.0.1{store}"], origin, env)
    run([DVC, "remote", "modify", "storage", "port", port], origin, env)

    def credentials(repo: Path) -> None:
        run([DVC, "remote", "modify", "--local", "storage", "user", user], repo, env)
        run([DVC, "remote", "modify", "--local", "storage", "keyfile", key], repo, env)

    credentials(origin)
    run([DVC, "repro", "-q"], origin, env)
    run(["git", "add", "-A"], origin, env)
    run(["git", "commit", "-qm", "outputs"], origin, env)
    committed, local = configparser.ConfigParser(), configparser.ConfigParser()
    committed.read(origin / ".dvc" / "config")
    local.read(origin / ".dvc" / "config.local")
    assert set(committed["'remote \"storage\"'"]) == {"url", "port"}  # no user, no key file in git
    assert dict(local["'remote \"storage\"'"]) == {"user": user, "keyfile": str(key)}
    assert ".dvc/config.local" not in run(["git", "ls-files"], origin, env)

    assert "files pushed" in run([DVC, "push"], origin, env)
    assert json.loads(run([DVC, "status", "-c", "--json"], origin, env)) == {}
    pushed = {p.name for p in store.rglob("*") if p.is_file()}
    assert len(pushed) == 4  # the dataset file, the adapter folder's manifest (.dir) and its two files
    base_files = {p.name for p in (origin / ".dvc" / "cache" / "files").rglob("*") if p.is_file()} - pushed
    assert len(base_files) == 2  # models/base (manifest and weights) stays in the local cache: `push: false`

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", origin, clone], tmp_path, env)
    credentials(clone)
    missing = json.loads(run([DVC, "status", "-c", "--json"], clone, env))
    assert missing == {path: "deleted" for path in  # on the remote, not in the clone's cache yet; models/base not listed
                       ("models/sft/adapter_model.safetensors", "models/sft/adapter_config.json", "data/datasets/rft_sft.jsonl")}
    run([DVC, "pull", "--allow-missing"], clone, env)  # everything but models/base
    assert not (clone / "models" / "base").exists()
    for rel in ("models/sft/adapter_model.safetensors", "models/sft/adapter_config.json", "data/datasets/rft_sft.jsonl"):
        assert (clone / rel).read_bytes() == (origin / rel).read_bytes(), rel
    repro = run([DVC, "repro"], clone, env)  # rebuilds the base; the training stage's outputs stand
    assert "Running stage 'base_model'" in repro and "Stage 'sft' didn't change" in repro, repro
    assert json.loads(run([DVC, "status", "-c", "--json"], clone, env)) == {}
    assert json.loads(run([DVC, "status", "--json"], clone, env)) == {}  # the pipeline is up to date in the clone
