#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: system packages, the Python venv, and a running Docker
# engine. `make setup` calls it; every other make target depends on it. Runs as root or as a user with sudo (only
# apt-get and dockerd need root: scripts/as_root.sh); the venvs belong to the user who runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/as_root.sh
VENV=${VENV:-.venv}
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
if [ "${1:-}" = --dry-run ]; then  # what set-up would install on this machine; nothing is installed
  shift  # more arguments go to the plan: --kind gpu --host FILE.json shows another host's (docs/gpu-setup.md)
  exec python3 -m termagent.setup_plan plan --venv "$VENV" --dry-run "$@"
fi

# 1. Debian packages the sandbox needs (docker engine, debootstrap for the offline base image, tmux), and OpenSSH's
#    server for tests/test_dvc_remote.py (it starts its own sshd on 127.0.0.1; the system service is not used).
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v tmux >/dev/null || need+=(tmux)
command -v patch >/dev/null || need+=(patch)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. Python venv with the project. termagent/setup_plan.py decides what goes in (docs/gpu-setup.md): on a CPU
#    machine the project from constraints.txt (torch 2.13.0+cpu), as always; on a machine with an NVIDIA driver
#    (TERMAGENT_DEVICE=cpu|gpu forces the kind): the driver checked (>= 580), the Ubuntu packages the host lacks
#    (python3-venv, python3-dev, build-essential, docker-compose-v2), the venv on the host's python3 when it has
#    pins (3.11: constraints-gpu.txt, 3.12: constraints-gpu-py312.txt) or on uv's CPython 3.12 (Ubuntu 22.04),
#    torch's CUDA build and vLLM, and Harbor in its own Python >= 3.12 venv with patches/ applied.
#    `scripts/setup.sh --dry-run` prints it, installs nothing.
kind=$(python3 -m termagent.setup_plan detect)
# A refusal (an NVIDIA driver too old for the CUDA build, no way to get `docker compose`) stops here, before any
# download; the plan says why. (Not `eval "$(...)"`: that would swallow the plan's exit status.)
plan_script=$(python3 -m termagent.setup_plan plan --kind "$kind" --venv "$VENV" --script) || exit 1
eval "$plan_script"

# 3. A running Docker engine.
bash scripts/dockerd.sh
log "ready: $("$VENV/bin/python" --version), docker $(docker version --format '{{.Server.Version}}')"
