#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine (run as root): system packages, the Python venv,
# and a running Docker engine. `make setup` calls it; every other make target depends on it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# 1. Debian packages the sandbox needs (docker engine, debootstrap for the offline base image, tmux).
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v tmux >/dev/null || need+=(tmux)
command -v patch >/dev/null || need+=(patch)
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. Python venv with the project (torch pinned to the CPU build in pyproject.toml).
stamp="$VENV/.termagent-installed"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
# constraints.txt pins every package to the versions of the committed run (pyproject.toml keeps ranges).
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  log "pip install -e '.[dev]' -c constraints.txt (first time ~2 min)"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e '.[dev]' -c constraints.txt
  touch "$stamp"
fi

# 3. A running Docker engine.
bash scripts/dockerd.sh
log "ready: $("$VENV/bin/python" --version), docker $(docker version --format '{{.Server.Version}}')"
