#!/usr/bin/env bash
# Start dockerd when no engine answers; wait until it does. Falls back to the vfs storage
# driver when overlay2 cannot be used (nested or exotic filesystems). dockerd runs as root (sudo for a user who
# is not root: scripts/as_root.sh); that user then reaches the engine through the docker group.
set -euo pipefail
. "$(dirname "$0")/as_root.sh"
docker info >/dev/null 2>&1 && exit 0
command -v dockerd >/dev/null || { echo "dockerd not installed (apt-get install docker.io)" >&2; exit 1; }
user=$(id -un)
no_access() {  # the engine answers root, not this user
  echo "[dockerd] the Docker engine runs, but $user cannot use its socket (/var/run/docker.sock). Add the user to" \
       "the docker group: \`sudo usermod -aG docker $user\`, then log in again (or run \`newgrp docker\`) and rerun" \
       "set-up. Members of that group are root on this host in effect (docs/gpu-setup.md#set-up-as-a-user-who-is-not-root)." >&2
  exit 1
}
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || {
    echo "[dockerd] no Docker engine answers $user. If one runs, add $user to the docker group (as root:" \
         "\`usermod -aG docker $user\`, then log in again); to start one, run set-up as root or install sudo for" \
         "$user (docs/gpu-setup.md#set-up-as-a-user-who-is-not-root)." >&2
    exit 1
  }
  as_root true  # sudo asks for the password here, in the foreground, not from the background start below
  as_root docker info >/dev/null 2>&1 && no_access
  log=${TMPDIR:-/tmp}/termagent-dockerd-$user.log
else
  log=/var/log/termagent-dockerd.log
fi
start() {
  local driver=$1
  echo "[dockerd] starting (storage driver: $driver)" >&2
  as_root nohup dockerd --storage-driver="$driver" >"$log" 2>&1 &
  local pid=$!  # dockerd, or the sudo that waits on it
  for _ in $(seq 1 60); do
    as_root docker info >/dev/null 2>&1 && return 0
    [ -d "/proc/$pid" ] || return 1
    sleep 0.5
  done
  as_root kill "$pid" 2>/dev/null || true
  return 1
}
start overlay2 || { sleep 1; start vfs; } || {
  echo "dockerd failed to start; see $log" >&2
  tail -n 20 "$log" >&2
  exit 1
}
docker info >/dev/null 2>&1 || no_access
