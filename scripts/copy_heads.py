"""Where a model's copy of a task's numbers stands, head by head: the two attention heads an induction copy
needs, measured on held-out renamed windows (termagent.train.copy_monitor.held_out_windows).

An induction-style copy of `harbor_78` (task) into `harbor_78` (reply) takes a *previous-token head* (at the
task's `_78`, attend to `harbor` one position back, so `_78` carries "after harbor") and an *induction head* (at
the reply's `harbor`, attend to the position whose previous token was `harbor`, the task's `_78`, and copy it).
This prints, per layer and head, the mean attention of each position to the one before it, and the mean attention
from the reply's stem to the task's number at every copy target; and at those targets how often the greedy
prediction is right and how often it is some number at all (the model knows a number comes, not which one).
A head in layer 0 with a high stem-to-number attention is not an induction head (its keys know only their own
token and position): it finds number tokens by what they are. That is what run 6's warmup, which copied, grew
(metrics/experiments/copy_heads_run6_warmup.json: 0.55 in layer 0, no previous-token head).

    python scripts/copy_heads.py models/warmup --out metrics/experiments/copy_heads_run6_warmup.json
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from termagent import atomic
from termagent.train.copy_monitor import HELD_OUT_SEED, held_out_windows, number_token_ids
from termagent.train.sft import load_conversations


@click.command()
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--demos", default="data/sft/demos.jsonl", show_default=True)
@click.option("--context", default=128, show_default=True)
@click.option("--windows", "max_windows", default=64, show_default=True)
@click.option("--seed", default=0, show_default=True, help="The warmup's seed (held-out windows use seed + 10,000).")
@click.option("--out", type=click.Path(path_type=Path), default=None)
def main(model_dir: Path, demos: str, context: int, max_windows: int, seed: int, out: Path | None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                                 use_kernels=False).eval()
    conversations, _ = load_conversations([demos])
    windows = held_out_windows(tokenizer, conversations, context=context, seed=seed + HELD_OUT_SEED,
                               max_windows=max_windows)
    if not windows:
        raise click.ClickException(f"{demos}: no held-out window with a copy target")
    numbers = number_token_ids(tokenizer)
    right = some_number = 0
    induction, previous, uniform = [], [], []
    with torch.no_grad():
        for w in windows:
            ids = w["input_ids"]
            out_ = model(input_ids=torch.tensor([ids]), output_attentions=True)
            attentions = torch.stack([a[0] for a in out_.attentions])  # (layers, heads, L, L)
            previous.append(torch.diagonal(attentions, offset=-1, dim1=2, dim2=3).mean(-1))
            uniform.append(sum(1 / (j + 1) for j in range(1, len(ids))) / (len(ids) - 1))  # a head attending evenly
            greedy = out_.logits[0].argmax(-1)
            for t, source in zip(w["targets"], w["sources"]):
                right += int(greedy[t - 1]) == ids[t]
                some_number += int(greedy[t - 1]) in numbers
                induction.append(attentions[:, :, t - 1, source])
    targets = len(induction)
    prev, ind = torch.stack(previous).mean(0), torch.stack(induction).mean(0)
    result = {
        "model": str(model_dir), "windows": len(windows), "copy_targets": targets,
        "greedy_right": right, "greedy_some_number": some_number,
        "previous_token_attention": prev.numpy().round(3).tolist(),  # [layer][head]
        "induction_attention": ind.numpy().round(3).tolist(),  # [layer][head]: reply stem -> task number
        "best_previous_token_head": round(float(prev.max()), 3), "best_induction_head": round(float(ind.max()), 3),
        "previous_token_if_uniform": round(sum(uniform) / len(uniform), 3),
    }
    click.echo(json.dumps({k: v for k, v in result.items() if not k.endswith("_attention")}))
    if out:
        atomic.write_json(out, result)


if __name__ == "__main__":
    main()
