"""Resident memory of an RL stage's process around the OpenVINO engine's live-adapter updates, per step.

    python scripts/bench_engine_memory.py --out metrics/bench_engine_memory.json          (make bench-engine-memory)
    python scripts/bench_engine_memory.py --model DIR --steps 2 --modes heap --out F     (toy shapes: the tiny model)

GRPO's peak RSS went from 10-11 GiB (runs 11-12, transformers generation) to 17-19 GiB (runs 13-15; 14.1 in run 16)
when rollouts moved to the engine (`engine.rl`), whose fused mode rebuilds the pipeline with the new LoRA weights after
every optimizer step: does the rebuild leak? Each mode runs in its own process (glibc's malloc settings cannot be put back) and does what a GRPO
step does to memory, at the stage's shapes: a trainer's LoRA model (params.yaml grpo.lora) takes an Adam step on a
batch of `--batch` rows of `--seq` tokens, its adapter goes to the engine (`set_adapter`, `engine.adapter_mode`),
and the engine generates `--rows` completions; the process's RSS (VmRSS) is read after each phase.

Modes: `heap` (termagent.allocator's setting, what the stages run with), `heap+trim` (the same, and glibc's
malloc_trim(0) after each adapter update: the old pipeline's freed pages go back to the kernel), `system` (glibc's
defaults). Writes --out (JSON). A benchmark: nothing asserts on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODES = ("heap", "heap+trim", "system")


def rss_gib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 2**20, 3)
    raise RuntimeError("no VmRSS in /proc/self/status")


def one_mode(mode: str, model_dir: Path, steps: int, batch: int, seq: int, rows: int, new_tokens: int) -> dict:
    import os

    os.environ["TERMAGENT_MALLOC"] = "system" if mode == "system" else "heap"
    from termagent import allocator

    malloc = allocator.configure()
    import torch
    from peft import get_peft_model

    from termagent.params import load_params
    from termagent.policy import make_policy
    from termagent.policy.openvino import EngineConfig, lora_scale
    from termagent.policy.spec import engine_spec
    from termagent.train.common import LoraParams, bf16_supported, load_model, peak_rss_gib

    params = load_params(REPO / "params.yaml")
    lora = LoraParams(**params["grpo"]["lora"])
    engine = EngineConfig(**params["engine"])
    bf16 = bf16_supported()
    record = {"mode": mode, "malloc": malloc, "bf16_autocast": bf16, "phases": []}
    record["start_gib"] = rss_gib()
    torch.manual_seed(0)
    model = get_peft_model(load_model(model_dir), lora.to_peft())
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    record["model_gib"] = rss_gib()
    policy = make_policy(engine_spec(engine, model_dir, max_batch=max(8, rows), logit_temperature=0.7))
    record["engine_gib"] = rss_gib()
    scale = lora_scale(json.loads(json.dumps(model.peft_config["default"].to_dict(), default=str)))
    vocab = model.config.vocab_size
    libc = None
    if mode == "heap+trim":
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    from peft import get_peft_model_state_dict

    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1000, vocab - 1000, (seq - new_tokens,), generator=g).tolist() for _ in range(rows)]
    for step in range(steps):
        t0 = time.perf_counter()
        ids = torch.randint(1000, vocab - 1000, (batch, seq), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):  # as the stage's TRL config (bf16 where the CPU has it)
            out = model(input_ids=ids, logits_to_keep=new_tokens + 1)
        loss = torch.nn.functional.cross_entropy(out.logits[:, :-1].float().reshape(-1, vocab),
                                                 ids[:, -new_tokens:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del out, loss
        after_train = rss_gib()
        policy.set_adapter(get_peft_model_state_dict(model), scale)
        if libc is not None:
            libc.malloc_trim(0)
        after_adapter = rss_gib()
        policy.generate_ids(prompts, max_tokens=new_tokens, temperature=0.7, seed=step)
        after_generate = rss_gib()
        record["phases"].append({"step": step, "train_gib": after_train, "adapter_gib": after_adapter,
                                 "generate_gib": after_generate, "wall_s": round(time.perf_counter() - t0, 2)})
        print(f"[{mode}] step {step}: train {after_train} adapter {after_adapter} generate {after_generate} GiB",
              file=sys.stderr, flush=True)
    record["adapter_updates"] = policy.stats["adapter_updates"]  # one engine rebuild per step, as the stage's
    policy.close()
    record["peak_rss_gib"] = peak_rss_gib()
    record["last_gib"] = record["phases"][-1]["generate_gib"] if record["phases"] else None
    record["growth_gib_per_step"] = (round((record["phases"][-1]["generate_gib"] - record["phases"][0]["generate_gib"])
                                           / (len(record["phases"]) - 1), 3) if len(record["phases"]) > 1 else None)
    return record


@click.command()
@click.option("--model", "model_dir", default=str(REPO / "models/base"), show_default=True,
              type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--steps", default=6, show_default=True)
@click.option("--batch", default=4, show_default=True, help="grpo.per_device_train_batch_size")
@click.option("--seq", default=1728, show_default=True, help="grpo.max_prompt_length + max_completion_length")
@click.option("--rows", default=8, show_default=True, help="completions per step")
@click.option("--new-tokens", default=192, show_default=True, help="grpo.max_completion_length")
@click.option("--modes", default=",".join(MODES), show_default=True)
@click.option("--one", default=None, hidden=True, help="run one mode in this process (the parent's child)")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False))
def main(model_dir: Path, steps: int, batch: int, seq: int, rows: int, new_tokens: int, modes: str, one: str | None,
         out: Path) -> None:
    if one:
        out.write_text(json.dumps(one_mode(one, model_dir, steps, batch, seq, rows, new_tokens)))
        return
    from termagent import atomic
    from termagent.precision import cpu_bf16_flags

    results = []
    for mode in modes.split(","):
        if mode not in MODES:
            raise click.BadParameter(f"{mode!r}: one of {MODES}", param_hint="--modes")
        part = out.with_suffix(f".{mode.replace('+', '_')}.part")
        subprocess.run([sys.executable, __file__, "--model", str(model_dir), "--steps", str(steps), "--batch",
                        str(batch), "--seq", str(seq), "--rows", str(rows), "--new-tokens", str(new_tokens),
                        "--one", mode, "--out", str(part)], check=True)
        results.append(json.loads(part.read_text()))
        part.unlink()
    atomic.write_json(out, {"command": " ".join(["python", "scripts/bench_engine_memory.py", *sys.argv[1:]]),
                            "model": str(model_dir), "steps": steps, "batch": batch, "seq": seq, "rows": rows,
                            "new_tokens": new_tokens, "cpu_bf16_flags": cpu_bf16_flags(), "modes": results,
                            "summary": {r["mode"]: {"peak_rss_gib": r["peak_rss_gib"], "last_gib": r["last_gib"],
                                                    "growth_gib_per_step": r["growth_gib_per_step"]}
                                        for r in results}})
    click.echo(json.dumps({r["mode"]: r["peak_rss_gib"] for r in results}))


if __name__ == "__main__":
    main()
