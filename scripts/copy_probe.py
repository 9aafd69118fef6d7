"""Copy probe: can a model configuration learn to copy the task's names into its keystrokes?

The embedded run's blocker (issue 9): the tiny model learns the Terminus format but types file names that
are not in the task. This probe trains on the demos' assistant turns as short windows (the turn and the
`--context` tokens before it, as the warmup's window phase), every window freshly renamed
(termagent.train.augment: a new bijection of the families' name pools each time, so no name can be
memorised), and reports, on held-out renamed windows, the greedy next-token accuracy over all reply tokens
and over the tokens that start a pool name (chance ~1/50). A configuration that copies shows the second
number climbing far above chance.

A plain torch loop (AdamW, no scheduler) rather than TRL's SFTTrainer: a research probe run for thousands
of steps, where the trainer's per-step overhead (2-3x on this CPU) matters and nothing is saved.

    python scripts/copy_probe.py --steps 900                         # models/base as it is
    python scripts/copy_probe.py --steps 1500 --hidden 256 --heads 8 --kv-heads 4 --out metrics/copy_probe.json
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import click
import torch

from termagent import atomic
from termagent.train.augment import entity_names, name_pattern, rename_conversation
from termagent.train.sft import context_windows


def _batch(windows: list[dict], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(w["input_ids"]) for w in windows)
    ids = torch.full((len(windows), width), pad_id)
    labels = torch.full((len(windows), width), -100)
    for i, w in enumerate(windows):
        n = len(w["input_ids"])
        ids[i, :n] = torch.tensor(w["input_ids"])
        labels[i, :n] = torch.where(torch.tensor(w["assistant_masks"]).bool(), ids[i, :n], torch.tensor(-100))
    return ids, labels


@click.command()
@click.option("--base", default="models/base", show_default=True, type=click.Path(path_type=Path))
@click.option("--demos", default="data/sft/demos.jsonl", show_default=True, type=click.Path(path_type=Path))
@click.option("--context", default=160, show_default=True)
@click.option("--steps", default=900, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option("--lr", default=3e-3, show_default=True)
@click.option("--hidden", type=int, default=None, help="A fresh random model of this width (default: --base as is).")
@click.option("--heads", type=int, default=None)
@click.option("--kv-heads", type=int, default=None)
@click.option("--eval-every", default=100, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default=None, type=click.Path(path_type=Path))
def main(base, demos, context, steps, batch_size, lr, hidden, heads, kv_heads, eval_every, seed, out):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if hidden:
        config = AutoConfig.from_pretrained(base)
        config.hidden_size, config.intermediate_size = hidden, 4 * hidden
        config.num_attention_heads = heads or config.num_attention_heads
        config.num_key_value_heads = kv_heads or config.num_key_value_heads
        model = AutoModelForCausalLM.from_config(config)
    else:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    conversations = [json.loads(line)["conversations"] for line in demos.read_text().splitlines() if line.strip()]
    conversations = [c for c in conversations if entity_names(c[0]["content"].split("Task:")[-1])]  # families
    rng = random.Random(seed)
    rng.shuffle(conversations)
    held, train = conversations[:20], conversations[20:]
    if not train:
        raise click.ClickException(f"{demos}: no demonstration of a generated family (nothing to rename)")

    def windows(convs):
        return [w for c in convs for w in context_windows(tokenizer, [rename_conversation(c, rng)], context)]

    held_windows = windows(held)
    name_starts = {i for tok, i in tokenizer.get_vocab().items()
                   if name_pattern().fullmatch(tok.lstrip("Ġ/`"))}
    pad_id = tokenizer.pad_token_id or 0

    @torch.no_grad()
    def evaluate() -> dict:
        model.eval()
        right = total = name_right = name_total = 0
        for start in range(0, len(held_windows), 32):
            ids, labels = _batch(held_windows[start : start + 32], pad_id)
            predicted = model(input_ids=ids).logits[:, :-1].argmax(-1)
            target = labels[:, 1:]
            scored = target != -100
            right += int((predicted[scored] == target[scored]).sum())
            total += int(scored.sum())
            is_name = scored & torch.isin(target, torch.tensor(sorted(name_starts)))
            name_right += int((predicted[is_name] == target[is_name]).sum())
            name_total += int(is_name.sum())
        model.train()
        return {"token_accuracy": round(right / max(1, total), 4), "name_accuracy": round(name_right / max(1, name_total), 4),
                "name_tokens": name_total}

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    curve, queue, t0 = [{"step": 0, **evaluate()}], [], time.monotonic()
    click.echo(json.dumps(curve[-1]))
    for step in range(1, steps + 1):
        if len(queue) < batch_size:
            queue += windows(train)  # a fresh renaming of every demo each pass
            rng.shuffle(queue)
        chunk, queue = queue[:batch_size], queue[batch_size:]
        ids, labels = _batch(chunk, pad_id)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % eval_every == 0 or step == steps:
            curve.append({"step": step, "loss": round(loss.item(), 4), **evaluate(),
                          "seconds": round(time.monotonic() - t0, 1)})
            click.echo(json.dumps(curve[-1]))
    if out:
        atomic.write_json(out, {"base": str(base), "hidden": hidden, "heads": heads, "kv_heads": kv_heads,
                                "parameters": sum(p.numel() for p in model.parameters()), "context": context,
                                "batch_size": batch_size, "lr": lr, "held_out_windows": len(held_windows),
                                "chance_name_accuracy": round(1 / 50, 3), "curve": curve})


if __name__ == "__main__":
    main()
