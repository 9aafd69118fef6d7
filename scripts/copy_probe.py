"""Copy probe: can a model configuration learn to copy the task's names into its keystrokes?

The embedded run's blocker (issue 9): the tiny model learns the Terminus format but types file names that
are not in the task. This probe trains on the demos' assistant turns as short windows (the turn and the
`--context` tokens before it, as the warmup's window phase), every window freshly renamed
(termagent.train.augment: a new bijection of the families' name pools each time, so no name can be
memorised), and reports, on held-out renamed windows, the greedy next-token accuracy over all reply tokens
and over the tokens that start a pool name (chance ~1/50). A configuration that copies shows the second
number climbing far above chance.

Every eval point also decodes greedy first replies to the held-out renamed tasks (from the prompt's last
`--context` tokens, as the windows train) and counts those whose keystrokes equal the oracle's
(first_turn_exact): for a one-command family that is the task solved.

`--pretrain-copy N` first trains N steps on synthetic induction data (random tokens; the second half of each
sequence is spans of the first half), the textbook way to grow copy heads before the windows.

A plain torch loop (AdamW, no scheduler) rather than TRL's SFTTrainer: a research probe, nothing is saved,
and every step's cost is the model's alone (SFTTrainer measured 1.19x its time per step here: 1.42 vs
1.20 s on models/base, 16 windows of 256 context).

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
from termagent.train.copy_monitor import number_token_ids
from termagent.train.sft import context_windows


def copy_batch(vocab: list[int], batch: int, length: int, generator: torch.Generator,
               min_span: int = 3, max_span: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels) of `batch` sequences of `length` tokens drawn from `vocab`.

    The first half is random; the second half is made of spans copied from the first half (random start,
    length min_span..max_span). Labels keep only the copied tokens after a span's first one: those a model
    can predict by finding the current token earlier and copying its successor (an induction head).
    """
    pool = torch.tensor(vocab)
    half = length // 2
    ids = pool[torch.randint(len(pool), (batch, length), generator=generator)]
    labels = torch.full((batch, length), -100)
    for row in range(batch):
        pos = half
        while pos < length:
            span = int(torch.randint(min_span, max_span + 1, (1,), generator=generator))
            span = min(span, length - pos)
            start = int(torch.randint(0, half - span, (1,), generator=generator))
            ids[row, pos:pos + span] = ids[row, start:start + span]
            labels[row, pos + 1:pos + span] = ids[row, pos + 1:pos + span]
            pos += span
    return ids, labels


def weighted_copy_loss(logits, ids, labels, numbers, weight: float):
    """Token cross-entropy over the labelled tokens, those a one-back copy predicts counting `weight` times;
    normalised by the labelled token count (the unweighted loss's denominator)."""
    from termagent.train.copy_monitor import copy_target_mask

    ce = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(),
                                           reduction="none", ignore_index=-100).view(labels.shape[0], -1)
    scored = labels[:, 1:] != -100
    w = 1.0 + (weight - 1.0) * copy_target_mask(ids, labels != -100, numbers)[:, 1:].float()
    return (ce * w * scored).sum() / scored.sum().clamp(min=1)


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
@click.option("--rope-theta", type=float, default=None, help="A fresh random model with this RoPE base.")
@click.option("--pretrain-copy", default=0, show_default=True,
              help="Steps of synthetic induction data (random tokens, spans of them repeated) before the windows.")
@click.option("--copy-vocab", type=click.Choice(["reply", "names"]), default="reply", show_default=True,
              help="Synthetic tokens: those of the held-out windows, or only the pool names and digits.")
@click.option("--copy-length", default=128, show_default=True)
@click.option("--copy-batch", "copy_batch_size", default=32, show_default=True)
@click.option("--copy-weight", default=1.0, show_default=True,
              help="Loss weight of the window tokens a one-back copy predicts (copy_monitor.copy_targets).")
@click.option("--qk-norm-gain", type=float, default=None,
              help="Start every q_norm/k_norm weight at this value (Qwen3's QK-norm caps attention logits at "
                   "~sqrt(head_dim) x gain^2: a sharp previous-token head needs more).")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default=None, type=click.Path(path_type=Path))
def main(base, demos, context, steps, batch_size, lr, hidden, heads, kv_heads, eval_every, rope_theta, pretrain_copy,
         copy_vocab, copy_length, copy_batch_size, copy_weight, qk_norm_gain, seed, out):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if hidden or rope_theta:
        config = AutoConfig.from_pretrained(base)
        hidden = hidden or config.hidden_size
        config.hidden_size, config.intermediate_size = hidden, 4 * hidden
        if rope_theta:
            config.rope_parameters["rope_theta"] = rope_theta
        config.num_attention_heads = heads or config.num_attention_heads
        config.num_key_value_heads = kv_heads or config.num_key_value_heads
        model = AutoModelForCausalLM.from_config(config)
    else:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_kernels=False)
    if qk_norm_gain is not None:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(("q_norm.weight", "k_norm.weight")):
                    param.fill_(qk_norm_gain)
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
    from termagent.protocol.parse import parse_response

    first_turns = [rename_conversation(c, rng)[:2] for c in held]  # (task prompt, the oracle's first reply)

    def keystrokes(text: str):
        parsed = parse_response(text)
        return [c.keystrokes for c in parsed.response.commands] if parsed.ok and parsed.response else None

    @torch.no_grad()
    def first_turn_match() -> dict:
        """Greedy first replies to held-out renamed tasks: valid JSON, and keystrokes equal to the oracle's."""
        model.eval()
        tokenizer.padding_side = "left"
        valid = exact = 0
        for start in range(0, len(first_turns), 10):
            chunk = first_turns[start : start + 10]
            # the prompt's last `context` tokens, as the windows trained on (the task text ends the prompt)
            prompts = [tokenizer.apply_chat_template(c[:1], tokenize=True, add_generation_prompt=True,
                                                     return_dict=True)["input_ids"][-context:] for c in chunk]
            enc = tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
            out = model.generate(**enc, max_new_tokens=160, do_sample=False, pad_token_id=pad_id)
            for c, row in zip(chunk, out[:, enc["input_ids"].shape[1]:]):
                got = keystrokes(tokenizer.decode(row, skip_special_tokens=True))
                valid += got is not None
                exact += got is not None and got == keystrokes(c[1]["content"])
        model.train()
        return {"first_turn_valid": round(valid / len(first_turns), 3), "first_turn_exact": round(exact / len(first_turns), 3)}

    name_starts = {i for tok, i in tokenizer.get_vocab().items()
                   if name_pattern().fullmatch(tok.lstrip("Ġ/`"))}
    pad_id = tokenizer.pad_token_id or 0
    number_ids = torch.tensor(sorted(i for tok, i in tokenizer.get_vocab().items() if tok.isdigit()))
    # pre_tokenizer stems: the number carries its underscore (`_78`), one token right after the stem's word
    stem_number_ids = torch.tensor(sorted(number_token_ids(tokenizer)), dtype=torch.long)
    underscore = tokenizer.convert_tokens_to_ids("_")

    @torch.no_grad()
    def evaluate() -> dict:
        model.eval()
        right = total = name_right = name_total = num_right = num_total = 0
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
            # the number of a `word_NN` stem: the digit token(s) right after `_`, or one `_NN` token
            is_num = scored & torch.isin(target, number_ids)
            is_num[:, 1:] &= target[:, :-1] == underscore
            is_num[:, 0] = False
            is_num |= scored & torch.isin(target, stem_number_ids)
            num_right += int((predicted[is_num] == target[is_num]).sum())
            num_total += int(is_num.sum())
        model.train()
        return {"token_accuracy": round(right / max(1, total), 4), "name_accuracy": round(name_right / max(1, name_total), 4),
                "name_tokens": name_total,
                "number_accuracy": round(num_right / max(1, num_total), 4), "number_tokens": num_total}

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    t0, pretrain_curve = time.monotonic(), []
    if pretrain_copy:
        if copy_vocab == "names":
            vocab = sorted(name_starts | set(number_ids.tolist()) | set(stem_number_ids.tolist()))
        else:
            vocab = sorted({t for w in held_windows for t in w["input_ids"]} | name_starts)
        g = torch.Generator().manual_seed(seed)
        for step in range(1, pretrain_copy + 1):
            ids, labels = copy_batch(vocab, copy_batch_size, copy_length, g)
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            if step % 100 == 0:
                with torch.no_grad():
                    ids, labels = copy_batch(vocab, 64, copy_length, g)
                    pred = model(input_ids=ids).logits[:, :-1].argmax(-1)
                    m = labels[:, 1:] != -100
                    acc = (pred[m] == labels[:, 1:][m]).float().mean().item()
                pretrain_curve.append({"step": step, "loss": round(loss.item(), 3), "copy_accuracy": round(acc, 3),
                                       "vocab": len(vocab), "seconds": round(time.monotonic() - t0, 1)})
                click.echo(json.dumps(pretrain_curve[-1]))
    curve, queue = [{"step": 0, **evaluate()}], []
    click.echo(json.dumps(curve[-1]))
    for step in range(1, steps + 1):
        if len(queue) < batch_size:
            queue += windows(train)  # a fresh renaming of every demo each pass
            rng.shuffle(queue)
        chunk, queue = queue[:batch_size], queue[batch_size:]
        ids, labels = _batch(chunk, pad_id)
        if copy_weight == 1.0:
            loss = model(input_ids=ids, labels=labels).loss
        else:
            loss = weighted_copy_loss(model(input_ids=ids).logits, ids, labels, stem_number_ids, copy_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % eval_every == 0 or step == steps:
            curve.append({"step": step, "loss": round(loss.item(), 4), **evaluate(), **first_turn_match(),
                          "seconds": round(time.monotonic() - t0, 1)})
            click.echo(json.dumps(curve[-1]))
    if out:
        atomic.write_json(out, {"base": str(base), "hidden": hidden, "heads": heads, "kv_heads": kv_heads,
                                "parameters": sum(p.numel() for p in model.parameters()), "context": context,
                                "batch_size": batch_size, "lr": lr, "held_out_windows": len(held_windows),
                                "chance_name_accuracy": round(1 / 50, 3), "rope_theta": rope_theta,
                                "copy_weight": copy_weight, "qk_norm_gain": qk_norm_gain, "seed": seed,
                                "pretrain_copy": pretrain_copy and {"steps": pretrain_copy, "vocab": copy_vocab,
                                                                   "length": copy_length, "batch": copy_batch_size,
                                                                   "curve": pretrain_curve},
                                "curve": curve})


if __name__ == "__main__":
    main()
