"""fp32 vs bf16 on this CPU, in one run: a LoRA training step and batched generation, on models/base (SmolLM2
when base_model.source is gguf) or, without a model directory, a tiny random-init Qwen3 built here.

    nice python scripts/bench_bf16.py --out metrics/bench_bf16.json                  (make bench-bf16)
    nice python scripts/bench_bf16.py --model /tmp/smollm2 --out metrics/bench_bf16.json

Modes, run interleaved (fp32, bf16 autocast, bf16 weights, fp32, ...) so a load change on a shared machine
hits them alike; per mode every time of `--repeats` rounds after one unmeasured warm-up, the median and the
best, and per bf16 mode the speed-up over fp32 round by round (the load average of each round is recorded):

- train: forward + backward + AdamW step of a LoRA (r=16, every linear layer of a block) on `--train-rows` x
  `--train-len` tokens, labels = inputs. `autocast` is what TRL/transformers do with `bf16=True, use_cpu=True`
  (forward under torch.autocast(cpu, bf16), fp32 master weights); `bf16_weights` casts the base model to bf16.
- generate: `generate` of `--gen-rows` prompts of `--gen-len` tokens + exactly `--new-tokens` new tokens
  (greedy, min = max new tokens), prefill included. `bf16_weights` is what HFPolicy(dtype=auto) loads on a
  bf16 CPU; `autocast` is what a trainer's fp32 model gets in process (HFPolicy.from_model).

A benchmark, not a test: nothing asserts on the times.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from termagent import atomic
from termagent.precision import cpu_bf16_flags, cpu_bf16_supported

MODES = ("fp32", "autocast", "bf16_weights")
NOTES = ("Timings on a machine shared with other jobs (this run: 2 CPU cores, 6 concurrent sessions): absolute "
         "numbers are noisy; the modes run interleaved (fp32, autocast, bf16_weights, repeated) so load changes "
         "hit them alike, and the ratios are the result. Compare only numbers from one file.")


def load_models(model_dir: Path | None):
    from transformers import AutoModelForCausalLM

    if model_dir is not None:
        fp32 = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        manifest = model_dir / "manifest.json"
        info = json.loads(manifest.read_text()) if manifest.is_file() else {}
        name = info.get("file") or info.get("hf_id") or info.get("architecture") or str(model_dir)
    else:
        from termagent.models.tiny import TinyModelConfig, build_tiny_model

        out = Path(tempfile.mkdtemp(prefix="bench-bf16-")) / "base"
        build_tiny_model(out, TinyModelConfig(), [REPO / "data" / "tasks"])
        fp32 = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
        name = "tiny random-init Qwen3 (base_model.tiny defaults)"
    fp32.eval()
    bf16 = copy.deepcopy(fp32).to(torch.bfloat16).eval()
    return name, fp32, bf16


def autocast(mode: str):
    return torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast" else contextlib.nullcontext()


def lora(model):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(copy.deepcopy(model), config)
    model.train()
    return model, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)


def train_step(model, optim, ids, mode: str) -> float:
    start = time.perf_counter()
    with autocast(mode):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def generate(model, ids, new_tokens: int, mode: str, pad_id: int) -> float:
    start = time.perf_counter()
    with torch.no_grad(), autocast(mode):
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad_id)
    assert out.shape[1] == ids.shape[1] + new_tokens
    return time.perf_counter() - start


@click.command()
@click.option("--model", "model_dir", type=click.Path(file_okay=False, path_type=Path), default=REPO / "models/base",
              show_default=True, help="a transformers model directory; absent: the tiny model is built")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=REPO / "metrics/bench_bf16.json",
              show_default=True)
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--train-rows", type=int, default=2, show_default=True)
@click.option("--train-len", type=int, default=1024, show_default=True)
@click.option("--gen-rows", type=int, default=8, show_default=True)
@click.option("--gen-len", type=int, default=512, show_default=True)
@click.option("--new-tokens", type=int, default=32, show_default=True)
def main(model_dir: Path, out: Path, repeats: int, train_rows: int, train_len: int, gen_rows: int, gen_len: int,
         new_tokens: int) -> None:
    started = time.monotonic()
    name, fp32, bf16 = load_models(model_dir if (model_dir / "config.json").is_file() else None)
    weights = {"fp32": fp32, "autocast": fp32, "bf16_weights": bf16}
    vocab = fp32.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    train_ids = torch.randint(64, vocab - 64, (train_rows, train_len), generator=generator)
    gen_ids = torch.randint(64, vocab - 64, (gen_rows, gen_len), generator=generator)
    pad_id = fp32.config.pad_token_id if fp32.config.pad_token_id is not None else 0

    trainers = {"fp32": lora(fp32)}
    trainers["autocast"] = trainers["fp32"]  # the same fp32 LoRA model, its forward under autocast
    trainers["bf16_weights"] = lora(bf16)
    train_s = {m: [] for m in MODES}
    gen_s = {m: [] for m in MODES}
    for m in MODES:  # warm-up: first calls allocate and pick kernels
        train_step(*trainers[m], train_ids, m)
        generate(weights[m], gen_ids[:, : min(gen_len, 64)], 2, m, pad_id)
    load = []
    for _ in range(repeats):
        load.append(round(os.getloadavg()[0], 2))
        for m in MODES:
            train_s[m].append(train_step(*trainers[m], train_ids, m))
        for m in MODES:
            gen_s[m].append(generate(weights[m], gen_ids, new_tokens, m, pad_id))
        click.echo(f"train s {({m: round(v[-1], 2) for m, v in train_s.items()})}  "
                   f"generate s {({m: round(v[-1], 2) for m, v in gen_s.items()})}", err=True)

    train_tokens, gen_tokens = train_rows * train_len, gen_rows * new_tokens

    def summary(times: dict[str, list[float]], tokens: int, key: str) -> dict:
        """Per mode: every time, the median and the best (the least disturbed by other jobs), tokens/s of the
        best; per bf16 mode: fp32's time over its own, round by round (the two ran back to back) and median."""
        out = {m: {f"{key}_s": [round(t, 3) for t in times[m]], "median_s": round(statistics.median(times[m]), 3),
                   "best_s": round(min(times[m]), 3), "tokens_per_s_best": round(tokens / min(times[m]), 1)}
               for m in MODES}
        for m in MODES[1:]:
            rounds = [a / b for a, b in zip(times["fp32"], times[m])]
            out[f"speedup_{m}"] = {"per_round": [round(r, 2) for r in rounds],
                                   "median": round(statistics.median(rounds), 2),
                                   "best_vs_best": round(min(times["fp32"]) / min(times[m]), 2)}
        return out

    train, gen = summary(train_s, train_tokens, "step"), summary(gen_s, gen_tokens, "call")
    doc = {
        "model": name,
        "n_parameters": sum(p.numel() for p in fp32.parameters()),
        "train": {"what": f"LoRA r=16 (7 linear modules per block) forward+backward+AdamW, {train_rows} x "
                          f"{train_len} tokens", **train},
        "generate": {"what": f"generate {gen_rows} x {gen_len}-token prompts + {new_tokens} new tokens each, "
                             "greedy, prefill included", **gen},
        "chosen": {"train": "autocast (TRL bf16=True, use_cpu=True; fp32 master weights): correct for every trained "
                            "configuration (a full fine-tune and modules_to_save included, whose AdamW updates would "
                            "round away on bf16 weights); bf16 weights are the faster choice for a pure LoRA run where "
                            "the numbers say so (docs/base-model.md)",
                   "generate": "bf16_weights (HFPolicy dtype=auto); autocast for a trainer's fp32 model "
                               "(HFPolicy.from_model)"},
        "repeats": repeats,
        "notes": NOTES,
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
                        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                        "cpu_bf16_flags": cpu_bf16_flags(), "cpu_bf16_supported": cpu_bf16_supported(),
                        "load_average_1min_per_round": load},
        "wall_s": round(time.monotonic() - started, 1),
    }
    atomic.write_json(out, doc)
    click.echo(json.dumps({k: doc[k] for k in ("train", "generate")}, indent=1))


if __name__ == "__main__":
    main()
