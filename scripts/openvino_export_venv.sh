#!/usr/bin/env bash
# .venv-openvino-export: the OpenVINO IR exporter (`optimum-cli export openvino`, optimum-intel) in a venv of its own,
# for the `export_openvino` DVC stage (models/base -> models/base_openvino).
#   make openvino-export-venv    (~1 GB, a few minutes; stamped, so a second run is instant)
# Pins: constraints-openvino-export.txt (what this resolved to, Python 3.11, Linux x86_64). Why a venv of its own:
# optimum-intel 2.2.0 / optimum 2.3.0 need transformers < 5.6, the project pins 5.25.0. torch 2.13.0+cpu comes from
# local disk; the torchvision it pulls is for another torch (`operator torchvision::nms does not exist`): removed.
set -euo pipefail
cd "$(dirname "$0")/.."
V=${OPENVINO_EXPORT_VENV:-.venv-openvino-export}
stamp="$V/.termagent-openvino-export"
want="openvino-export $(sha256sum constraints-openvino-export.txt | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then exit 0; fi
[ -x "$V/bin/python" ] || python3 -m venv "$V"
"$V/bin/pip" install -q -c constraints-openvino-export.txt pip >/dev/null
"$V/bin/pip" install -q -c constraints-openvino-export.txt torch optimum-intel optimum openvino openvino-tokenizers \
  transformers
"$V/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$V/bin/python" -c 'import importlib.metadata as m, optimum.exporters.openvino, torch; print(*(f"{p} {m.version(p)}" for p in ("optimum-intel", "openvino", "transformers", "torch")))'
printf '%s\n' "$want" > "$stamp"
