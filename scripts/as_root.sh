# Sourced by scripts/setup.sh and scripts/dockerd.sh (and the plan they evaluate): `as_root CMD...` runs CMD as
# root: directly when set-up runs as root, else through sudo (which may ask for the password once), else it stops
# naming what needed root. Everything else set-up does (the venvs, pip, uv) runs as the calling user.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "[setup] needs root for: $*. Run set-up as root, or install sudo and allow $(id -un) to use it (docs/gpu-setup.md#set-up-as-a-user-who-is-not-root)." >&2
    return 1
  fi
}
