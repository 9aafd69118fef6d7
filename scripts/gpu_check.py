"""GPU check for a lent H100/H200: SFT tokens/s and one GRPO step (generation + loss) at the original batch
shapes (DESIGN.md §4), on a random-init Qwen3 of ~0.6 B parameters built from a config (no download), bf16,
LoRA r=64/alpha=64 on every linear layer. Checks that the loss falls over a few steps on a fixed batch.
Needs torch, transformers, peft (no trl, no datasets, no network). Writes metrics/bench_gpu.json.

    python scripts/gpu_check.py                  # on a CUDA machine (make gpu-check); < 8 minutes
    python scripts/gpu_check.py --cpu-dry-run    # the same code paths at toy shapes on CPU (no timing value)

Refuses (exit 2) without CUDA unless --cpu-dry-run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# Qwen3-0.6B's shape (vocab 151936, tied embeddings) = ~0.6 B parameters.
FULL = {"vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
            "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960}
TOY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096}
# DESIGN.md §4: SFT batch 1 x accumulation 16, max length 8192; GRPO batch 4 x accumulation 4, 8 generations,
# max completion 2048; LoRA r=64, alpha=64 on q/k/v/o/gate/up/down_proj.
FULL_SHAPES = {"sft_len": 8192, "sft_accum": 16, "sft_steps": 3, "loss_steps": 6, "grpo_prompt": 1024, "grpo_completion": 2048,
                   "grpo_batch": 4, "grpo_accum": 4, "generations": 8}
TOY_SHAPES = {"sft_len": 64, "sft_accum": 2, "sft_steps": 2, "loss_steps": 6, "grpo_prompt": 16, "grpo_completion": 8,
                  "grpo_batch": 2, "grpo_accum": 2, "generations": 2}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build(shape: dict, device, dtype):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(**shape, tie_word_embeddings=True, rope_parameters={"rope_type": "default",
                                                                             "rope_theta": 1_000_000.0})
    config._attn_implementation = "sdpa"
    model = Qwen3ForCausalLM(config).to(device=device, dtype=dtype)
    n_params = sum(p.numel() for p in model.parameters())
    model = get_peft_model(model, LoraConfig(r=64, lora_alpha=64, lora_dropout=0.0, target_modules=TARGETS,
                                             task_type="CAUSAL_LM"))
    return model, n_params


def sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def token_logprobs(model, ids, n_prompt: int):
    """log p(token) of every completion token (positions n_prompt..end), computed in chunks of the vocab."""
    import torch

    logits = model(input_ids=ids).logits[:, n_prompt - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, ids[:, n_prompt:, None])[..., 0]


def sft_bench(model, s: dict, vocab: int, device) -> dict:
    """Full-length sequences, loss on every token, gradient checkpointing; tokens/s over `sft_steps` optimizer
    steps of `sft_accum` micro-batches."""
    import torch

    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
    gen = torch.Generator(device="cpu").manual_seed(1)
    tokens = 0
    sync(device)
    t0 = time.perf_counter()
    for _ in range(s["sft_steps"]):
        for _ in range(s["sft_accum"]):
            ids = torch.randint(0, vocab, (1, s["sft_len"]), generator=gen).to(device)
            loss = model(input_ids=ids, labels=ids).loss / s["sft_accum"]
            loss.backward()
            tokens += ids.numel()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync(device)
    wall = time.perf_counter() - t0
    return {"tokens": tokens, "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 1),
            "seq_len": s["sft_len"], "accumulation": s["sft_accum"], "optimizer_steps": s["sft_steps"],
            "peak_memory_gib": _peak(device)}


def loss_falls(model, s: dict, vocab: int, device) -> dict:
    """A fixed batch, a few optimizer steps at a large LoRA lr: the loss must fall."""
    import torch

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ids = torch.randint(0, vocab, (1, min(512, s["sft_len"])), generator=torch.Generator().manual_seed(2)).to(device)
    losses = []
    for _ in range(s["loss_steps"]):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(round(loss.item(), 4))
    return {"losses": losses, "fell": losses[-1] < losses[0]}


def grpo_step(model, s: dict, vocab: int, device) -> dict:
    """One GRPO optimizer step at the original shapes: generate `grpo_batch * grpo_accum` completions of
    exactly `grpo_completion` tokens (groups of `generations`), then the Dr.GRPO clipped loss with
    group-centred advantages over `grpo_accum` micro-batches of `grpo_batch`."""
    import torch

    n = s["grpo_batch"] * s["grpo_accum"]
    n_prompts = max(1, n // s["generations"])
    gen = torch.Generator().manual_seed(3)
    prompts = torch.randint(0, vocab, (n_prompts, s["grpo_prompt"]), generator=gen)
    prompts = prompts.repeat_interleave(s["generations"], 0)[:n].to(device)
    model.eval()
    model.gradient_checkpointing_disable()
    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                             temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=s["grpo_completion"],
                             min_new_tokens=s["grpo_completion"], pad_token_id=0, eos_token_id=None)
    sync(device)
    gen_s = time.perf_counter() - t0
    rewards = torch.rand(n, generator=gen).to(device)
    groups = rewards.view(-1, min(s["generations"], n))
    advantages = (groups - groups.mean(1, keepdim=True)).view(-1)  # scale_rewards none
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-6)
    sync(device)
    t1 = time.perf_counter()
    with torch.no_grad():
        old = torch.cat([token_logprobs(model, out[i:i + s["grpo_batch"]], s["grpo_prompt"])
                         for i in range(0, n, s["grpo_batch"])])
    total = 0.0
    for i in range(0, n, s["grpo_batch"]):
        logp = token_logprobs(model, out[i:i + s["grpo_batch"]], s["grpo_prompt"])
        ratio = torch.exp(logp - old[i:i + s["grpo_batch"]])
        adv = advantages[i:i + s["grpo_batch"], None]
        per_token = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
        loss = per_token.sum() / (n * s["grpo_completion"])  # dr_grpo: a constant normaliser
        loss.backward()
        total += loss.item()
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync(device)
    loss_s = time.perf_counter() - t1
    return {"completions": n, "prompt_len": s["grpo_prompt"], "completion_len": s["grpo_completion"],
            "generation_s": round(gen_s, 2), "generated_tokens_per_s": round(n * s["grpo_completion"] / gen_s, 1),
            "loss_s": round(loss_s, 2), "step_s": round(gen_s + loss_s, 2), "loss": total,
            "peak_memory_gib": _peak(device)}


def _peak(device):
    import torch

    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="metrics/bench_gpu.json")
    parser.add_argument("--cpu-dry-run", action="store_true", help="toy shapes on CPU: checks the code, times nothing useful")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available() and not args.cpu_dry_run:
        print("gpu_check: no CUDA device (torch.cuda.is_available() is False); this check needs one H100/H200. "
              "Use --cpu-dry-run to exercise the code at toy shapes.", file=sys.stderr)
        return 2
    dry = args.cpu_dry_run
    device = torch.device("cpu" if dry else "cuda")
    dtype = torch.float32 if dry else torch.bfloat16
    shape, s = (TOY, TOY_SHAPES) if dry else (FULL, FULL_SHAPES)
    started = time.perf_counter()
    model, n_params = build(shape, device, dtype)
    result = {"dry_run": dry, "device": torch.cuda.get_device_name(0) if not dry else "cpu",
              "dtype": str(dtype).replace("torch.", ""), "n_parameters": n_params, "model_shape": shape,
              "lora": {"r": 64, "alpha": 64, "target_modules": TARGETS},
              "versions": {"torch": torch.__version__, "python": platform.python_version(),
                           "transformers": __import__("transformers").__version__,
                           "peft": __import__("peft").__version__}}
    print(f"model: {n_params / 1e6:.0f} M parameters on {result['device']} ({result['dtype']})", flush=True)
    result["loss_check"] = loss_falls(model, s, shape["vocab_size"], device)
    print(f"loss check: {result['loss_check']}", flush=True)
    result["sft"] = sft_bench(model, s, shape["vocab_size"], device)
    print(f"sft: {result['sft']}", flush=True)
    result["grpo"] = grpo_step(model, s, shape["vocab_size"], device)
    print(f"grpo: {result['grpo']}", flush=True)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)
    print(f"{out}: written ({result['wall_s']} s)")
    return 0 if result["loss_check"]["fell"] else 1


if __name__ == "__main__":
    sys.exit(main())
