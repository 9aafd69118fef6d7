"""Fixtures shared by every test package. Docker tests ask for `base_image`: it skips them with a clear
message when no engine answers, and builds the sandbox base image once when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The same numbers on every machine: fp32 unless a test turns bf16 on (tests/test_precision.py does, with
# TERMAGENT_BF16=1 or an explicit dtype). Without this, a CPU with bf16 instructions (this project's) would run
# every training and generation test in bf16 and one without them in fp32.
os.environ.setdefault("TERMAGENT_BF16", "0")


@pytest.fixture(scope="session")
def docker_client():
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(max_pool_size=32)
        client.ping()
    except Exception as e:  # noqa: BLE001 (any failure to reach the engine means: skip)
        pytest.skip(f"no Docker engine answers ({type(e).__name__}); start one with `bash scripts/dockerd.sh`")
    return client


@pytest.fixture(scope="session")
def base_image(docker_client):
    """The sandbox base image of params.yaml's recipe (a `BaseImage`: .tag, .id), built if absent."""
    from termagent.params import load_params, section
    from termagent.sandbox.image import ensure_base_image
    from termagent.sandbox.settings import SandboxParams

    recipe = section(load_params(REPO / "params.yaml"), "sandbox", SandboxParams).base_recipe()
    return ensure_base_image(recipe, client=docker_client)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Qwen3 + BPE tokenizer + chat template, built once per session from the bundled tasks
    (what `dvc repro base_model` makes, a size smaller). Used by policy, serve and agent tests."""
    from termagent.models.tiny import TinyModelConfig, build_tiny_model

    out = tmp_path_factory.mktemp("tiny") / "base"
    config = TinyModelConfig(vocab_size=2048, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
    build_tiny_model(out, config, [REPO / "data" / "tasks"])
    return out


def export_openvino_ir(model_dir: Path) -> Path:
    """`model_dir`'s OpenVINO IR beside it (models/base -> models/base_openvino), exported by the export_openvino
    stage's own code (~10-50 s) with .venv-openvino-export (`make openvino-export-venv`; skips until it exists)."""
    venv = REPO / ".venv-openvino-export"
    if not (venv / "bin" / "optimum-cli").is_file():
        pytest.skip("no .venv-openvino-export: run `make openvino-export-venv` (the OpenVINO exporter's venv)")
    import importlib.util

    from termagent.policy.openvino import ir_dir_for

    spec = importlib.util.spec_from_file_location("export_openvino", REPO / "stages" / "export_openvino.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    out = ir_dir_for(model_dir)
    if not (out / "openvino_model.xml").is_file():
        stage.export_ir(model_dir, out, venv=venv, log=lambda _: None)
    return out


@pytest.fixture(scope="session")
def tiny_openvino_dir(tiny_model_dir) -> Path:
    """The tiny model's OpenVINO IR (export_openvino_ir)."""
    return export_openvino_ir(tiny_model_dir)


HARBOR_VERSION = "0.25.0"  # the release eval.backend harbor pins (agent.harbor_version)


@pytest.fixture(scope="session")
def harbor_wheel() -> Path:
    """The pinned Harbor wheel (read, never installed: Harbor needs Python >= 3.12), downloaded once into
    ~/.cache/termagent/wheels with `pip download --no-deps`; skips, saying why, when that fails."""
    import subprocess
    import sys

    cache = Path.home() / ".cache" / "termagent" / "wheels"
    wheels = sorted(cache.glob(f"harbor-{HARBOR_VERSION}-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        fetch = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--python-version", "3.12",
             "--only-binary=:all:", f"harbor=={HARBOR_VERSION}", "-d", str(cache)],
            capture_output=True, text=True, timeout=300, check=False)
        wheels = sorted(cache.glob(f"harbor-{HARBOR_VERSION}-*.whl"))
        if fetch.returncode != 0 or not wheels:
            pytest.skip(f"cannot download the harbor=={HARBOR_VERSION} wheel (no package index reachable?): "
                        f"{fetch.stderr.strip().splitlines()[-1:] or fetch.returncode}")
    return wheels[0]
