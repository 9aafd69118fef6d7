"""bf16 where the hardware has it: detection from a real /proc/cpuinfo, the override, the training arguments, and
log-probabilities computed in float32 from a bf16 model (in-process generation, TRL's fused LM head)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from termagent.precision import BF16_ENV, bf16_mode, cpu_bf16_flags, cpu_bf16_supported, generation_dtype

CPUINFO = Path(__file__).parent / "fixtures" / "cpuinfo" / "amd_epyc_avx512_bf16.txt"  # this project's machine
HELLO = [{"role": "user", "content": "List the files in /app and count the lines of notes.txt."}]


def without_bf16_flags(tmp_path) -> Path:
    """The same file with the bf16 flags taken out: an AVX-512 CPU without BF16 (e.g. Zen 3 / Skylake-X)."""
    text = CPUINFO.read_text().replace(" avx512_bf16", "").replace(" amx_bf16", "")
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_flags_are_read_from_a_real_cpuinfo(tmp_path):
    assert cpu_bf16_flags(CPUINFO) == ["avx512_bf16"]
    assert cpu_bf16_supported(CPUINFO, env={}) is True
    plain = without_bf16_flags(tmp_path)
    assert "avx512f" in plain.read_text()  # AVX-512 without BF16 is not enough
    assert cpu_bf16_flags(plain) == [] and cpu_bf16_supported(plain, env={}) is False
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes sve bf16 i8mm\n\n")
    assert cpu_bf16_flags(arm) == ["bf16"]
    assert cpu_bf16_flags(tmp_path / "absent") == []  # no /proc (macOS, a sandbox): fp32


def test_the_env_override_forces_either_way(tmp_path):
    plain = without_bf16_flags(tmp_path)
    assert cpu_bf16_supported(CPUINFO, env={BF16_ENV: "0"}) is False
    assert cpu_bf16_supported(plain, env={BF16_ENV: "1"}) is True
    assert cpu_bf16_supported(CPUINFO, env={BF16_ENV: "auto"}) is True
    with pytest.raises(ValueError, match=f"env {BF16_ENV} must be auto, 0 or 1, got 'maybe'"):
        bf16_mode({BF16_ENV: "maybe"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU rule; a GPU decides by itself")
def test_training_arguments_and_weights_follow_the_switch(monkeypatch, tmp_path):
    from termagent.train.common import training_kwargs

    monkeypatch.setenv(BF16_ENV, "1")
    kwargs = training_kwargs(output_dir=tmp_path, seed=0)
    assert kwargs["bf16"] is True and kwargs["use_cpu"] is True  # TRL/transformers: CPU autocast
    assert generation_dtype("cpu") == torch.bfloat16
    monkeypatch.setenv(BF16_ENV, "0")
    assert training_kwargs(output_dir=tmp_path, seed=0)["bf16"] is False
    assert generation_dtype("cpu") == torch.float32


def bf16_representable(values: list[float]) -> list[bool]:
    t = torch.tensor(values, dtype=torch.float32)
    return (t.bfloat16().float() == t).tolist()


def test_generation_logprobs_of_a_bf16_model_are_float32(tiny_model_dir, monkeypatch):
    """A log-softmax taken in bf16 can only return bf16 values; upcast first, almost none is one."""
    from termagent.policy.hf import HFPolicy

    monkeypatch.setenv(BF16_ENV, "1")
    policy = HFPolicy(tiny_model_dir)  # dtype=auto: bf16 weights on a bf16 CPU
    assert policy.model.dtype == torch.bfloat16 and policy.autocast_dtype is None
    [gen] = policy.generate([HELLO], max_tokens=8, temperature=0.7, seed=0)
    assert len(gen.logprobs) == 8 and all(lp <= 0 for lp in gen.logprobs)
    assert sum(bf16_representable(gen.logprobs)) <= 1
    # the prefix-cached decoder (eval's path) upcasts the same way
    cached = HFPolicy(tiny_model_dir, prefix_cache=4)
    [gen] = cached.generate([HELLO], max_tokens=8, temperature=0.7, seed=0)
    assert cached.model.dtype == torch.bfloat16 and sum(bf16_representable(gen.logprobs)) <= 1


def test_a_trainers_fp32_model_generates_under_autocast_with_float32_logprobs(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from termagent.policy.hf import HFPolicy

    monkeypatch.setenv(BF16_ENV, "1")
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    policy = HFPolicy.from_model(model, AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    assert policy.autocast_dtype == torch.bfloat16 and model.dtype == torch.float32  # weights untouched
    prompt = policy.prompt_ids(HELLO)
    [gen] = policy.generate_ids([prompt], max_tokens=6, temperature=1.0, seed=0)
    assert sum(bf16_representable(gen.logprobs)) <= 1
    # the logits really came from bf16 matmuls: they equal an autocast forward, not the fp32 one
    ids = torch.tensor([prompt])
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16_logits = model(ids).logits[0, -1].float()
        fp32_logits = model(ids).logits[0, -1]
    first = torch.log_softmax(bf16_logits, -1)[gen.completion_ids[0]].item()
    assert gen.logprobs[0] == pytest.approx(first, abs=1e-5)
    assert abs(torch.log_softmax(fp32_logits, -1)[gen.completion_ids[0]].item() - first) > 1e-5
    monkeypatch.setenv(BF16_ENV, "0")
    assert HFPolicy.from_model(model, policy.tokenizer).autocast_dtype is None


def test_trl_fused_lm_head_returns_float32_logprobs_under_autocast(tiny_model_dir):
    """GRPO/MT-GRPO's training-side logprobs (TRL's fused LM head, under the trainer's CPU autocast)."""
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    add_fused_lm_head(model)
    ids = torch.randint(10, 500, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, labels=ids, fused_lm_head=True)
        logits = model(input_ids=ids).logits
    assert logits.dtype == torch.bfloat16 and out.log_probs.dtype == torch.float32
    reference = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    assert out.log_probs.shape == reference.shape and torch.allclose(out.log_probs, reference, atol=2e-2)
    assert sum(bf16_representable(out.log_probs.flatten().tolist())) < out.log_probs.numel() // 4


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU rule; a GPU decides by itself")
def test_sft_trains_under_cpu_autocast_when_bf16_is_on(tiny_model_dir, tmp_path, monkeypatch):
    """A real TRL SFT run with the switch on: transformers' Trainer accepts bf16=True with use_cpu=True (CPU
    autocast through accelerate), the fp32 master weights and the adapter all train, the record says bf16."""
    import json

    from termagent.train.common import LoraParams
    from termagent.train.sft import SFTParams, train_sft

    monkeypatch.setenv(BF16_ENV, "1")
    reply = '{"analysis": "", "plan": "ls", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}], "task_complete": true}'
    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps({"conversations": [*HELLO, {"role": "assistant", "content": reply}],
                                         "task_id": f"t{i}"}) + "\n" for i in range(2)))
    params = SFTParams(datasets=[str(demos)], max_length=256, max_steps=2, gradient_accumulation_steps=1,
                       trl={**SFTParams().trl, "learning_rate": 5e-3, "warmup_steps": 0.0}, lora=LoraParams(r=4, alpha=8),
                       skip_seen_by=None)
    metrics = train_sft(tiny_model_dir, tmp_path / "adapter", params, metrics_dir=tmp_path / "metrics",
                        curves_png=tmp_path / "curves.png")
    assert metrics["global_steps"] == 2
    assert metrics["adapter_tensors"] > 0 and metrics["adapter_tensors_changed"] == metrics["adapter_tensors"]
    assert json.loads((tmp_path / "metrics" / "train.json").read_text())["environment"]["bf16"] is True
