"""Decode-step speed of the running batch's KV cache: transformers' `DynamicCache` vs termagent's growing
buffers (`termagent.policy.kv.growing_cache`), in one run, on models/base.

    python scripts/bench_kv_cache.py --out metrics/bench_kv_cache.json          (make bench-kv-cache)

What a decode step of `CachedDecoder` costs: `--rows` rows (default 8, eval.concurrency) with `--width`
cached tokens each (the conversation so far: an agent's prompt grows to thousands of tokens), one token per
row per forward, the attention mask grown by one column per step as `CachedDecoder.step` does. `DynamicCache`
concatenates every row's keys and values with the new token's on every step in every layer; the growing
cache writes the token into spare room. Per width: ms per step (median of `--repeats`, the two caches
alternating) and whether the logits of every step are bit-identical (they must be: it is the same
arithmetic on the same numbers). A benchmark, not a test: nothing asserts on the times.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import click
import torch

REPO = Path(__file__).resolve().parents[1]
from termagent import atomic
from termagent.policy.kv import growing_cache


def decode(model, kind: str, *, rows: int, width: int, steps: int, seed: int = 0) -> tuple[float, list]:
    """(seconds per decode step, the logits of every step) after a `width`-token prefill of `rows` rows."""
    from transformers import DynamicCache

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size - 64, (rows, width), generator=generator)
    mask = torch.ones(rows, width, dtype=torch.long)
    logits = []
    with torch.no_grad():
        cache = DynamicCache()
        out = model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True)
        if kind == "growing":
            cache = growing_cache([(k, v) for k, v, *_ in cache], spare=steps)
        tokens = out.logits[:, -1].argmax(-1)
        start = time.perf_counter()
        for step in range(steps):
            mask = torch.cat([mask, torch.ones(rows, 1, dtype=mask.dtype)], dim=1)
            positions = torch.full((rows, 1), width + step)
            out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=positions, cache=cache,
                        use_cache=True)
            logits.append(out.logits[:, -1])
            tokens = logits[-1].argmax(-1)
        elapsed = time.perf_counter() - start
    return elapsed / steps, logits


@click.command()
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=REPO / "models/base", show_default=True)
@click.option("--rows", type=int, default=8, show_default=True)
@click.option("--widths", default="500,2000,4000", show_default=True, help="cached tokens per row, comma-separated")
@click.option("--steps", type=int, default=64, show_default=True, help="decode steps timed per run")
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
def main(model_dir: Path, rows: int, widths: str, steps: int, repeats: int, out: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, use_kernels=False).eval()
    for kind in ("dynamic", "growing"):  # warm-up: first-call allocations and kernel selection, untimed
        decode(model, kind, rows=rows, width=64, steps=4)
    results = {}
    for width in (int(w) for w in widths.split(",")):
        times = {"dynamic": [], "growing": []}
        identical = True
        for _ in range(repeats):
            per_step = {}
            for kind in ("dynamic", "growing"):
                per_step[kind], logits = decode(model, kind, rows=rows, width=width, steps=steps)
                times[kind].append(per_step[kind])
                if kind == "dynamic":
                    reference = logits
                else:
                    identical &= all(torch.equal(a, b) for a, b in zip(reference, logits))
        median = {kind: statistics.median(t) for kind, t in times.items()}
        results[str(width)] = {
            "ms_per_step": {kind: round(1000 * m, 2) for kind, m in median.items()},
            "runs_ms_per_step": {kind: [round(1000 * t, 2) for t in ts] for kind, ts in times.items()},
            "speedup": round(median["dynamic"] / median["growing"], 2),
            "logits_bit_identical": identical,
        }
        print(f"width {width}: dynamic {1000 * median['dynamic']:.1f} ms/step, growing "
              f"{1000 * median['growing']:.1f} ms/step ({results[str(width)]['speedup']}x), "
              f"logits identical: {identical}")
    atomic.write_json(out, {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "protocol": {"model": str(model_dir.relative_to(REPO) if model_dir.is_relative_to(REPO) else model_dir),
                     "rows": rows, "steps": steps, "repeats": repeats, "torch_threads": torch.get_num_threads(),
                     "attention": model.config._attn_implementation},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__},
        "widths": results,
    })


if __name__ == "__main__":
    main()
