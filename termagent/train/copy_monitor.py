"""Held-out copy accuracy during the warmup's window phase, and the phase's end once the model copies.

The embedded signal rests on one skill the random-init tiny model must grow in the window phase: typing a
`word_NN` stem's number as the task has it (`harbor_78` in the task -> `harbor_78` in the command), an
induction-style one-back copy. It emerges abruptly and at a run-dependent step: two warmups of the same
params, whose demos differed only in printed PIDs and mtimes, copied 47 of 94 and 1 of 94 numbers after the
same 1,566 window steps (metrics/experiments/main_job_two_runs.json). A fixed step budget is a coin flip.

So the window phase measures the copy as it trains, on held-out windows: demos renamed through bijections
no training pass draws (seed + HELD_OUT_SEED), so a number there can only be predicted by copying it. Every
`window_copy_eval_every` optimizer steps it takes the greedy next-token accuracy on the number tokens of the
assistant turns that a one-back copy can predict (the same (word, number) pair appears earlier in the
window), logs it to dvclive (`copy/number_accuracy`, a curve of `dvc plots show` and curves.png) and, with a
`window_copy_target`, ends the phase at the first measurement at or above it (transformers'
`control.should_training_stop`, as EarlyStoppingCallback does). `window_epochs` is then the budget, not the
length: a run where the copy emerges early stops early; one where it has not emerged trains on, and records
that it never reached the target (`copy_reached_step: null`) rather than pretending.
"""

from __future__ import annotations

import random
from typing import Any

import torch
from transformers import TrainerCallback

from termagent.train.augment import entity_names, rename_conversation

HELD_OUT_SEED = 10_000  # added to the stage seed; the window passes use seed + 0, 1, 2, ...


def number_token_ids(tokenizer) -> set[int]:
    """The `_NN` tokens of a `pre_tokenizer: stems` vocabulary (`_78`: a stem's number with its underscore)."""
    return {i for tok, i in tokenizer.get_vocab().items() if tok[:1] == "_" and tok[1:].isdigit()}


def copy_sources(input_ids: list[int], assistant_mask: list[int], numbers: set[int]) -> dict[int, int]:
    """{target: source}: each assistant token that is a number and that a one-back copy predicts (the pair
    (token before it, it) occurs earlier in the same sequence), with the position of that pair's latest
    earlier occurrence (the token a copy would read)."""
    last: dict[tuple[int, int], int] = {}
    out = {}
    for j in range(1, len(input_ids)):
        pair = (input_ids[j - 1], input_ids[j])
        if assistant_mask[j] and input_ids[j] in numbers and pair in last:
            out[j] = last[pair]
        last[pair] = j
    return out


def copy_targets(input_ids: list[int], assistant_mask: list[int], numbers: set[int]) -> list[int]:
    """Positions of the assistant tokens that are a number and that a one-back copy predicts: the pair
    (token before it, it) occurs earlier in the same sequence."""
    return list(copy_sources(input_ids, assistant_mask, numbers))


def copy_target_mask(input_ids: torch.Tensor, labelled: torch.Tensor, numbers: torch.Tensor) -> torch.Tensor:
    """`copy_targets` for a batch: (B, L) bool, True where the token is labelled, a number, and its pair
    (token before it, it) occurs earlier in the same row. `numbers`: a 1-D tensor of the number token ids."""
    ids = input_ids.long()
    pairs = torch.full_like(ids, -1)
    pairs[:, 1:] = ids[:, :-1] * (int(ids.max()) + 1) + ids[:, 1:]  # one code per (previous, current) pair
    same = pairs.unsqueeze(2) == pairs.unsqueeze(1)  # (B, L, L): [b, j, k] pair j == pair k
    earlier = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril(-1)
    seen = (same & earlier & (pairs.unsqueeze(1) >= 0)).any(-1)
    return labelled.bool() & torch.isin(ids, numbers.to(ids.device)) & seen


def held_out_windows(tokenizer, conversations: list[list[dict]], *, context: int, seed: int,
                     max_windows: int) -> list[dict]:
    """Windows ({input_ids, targets, sources}: `copy_sources` as two aligned lists) of renamed copies of the conversations that name pool entities, drawn
    with `seed` (not a training pass's), keeping those with at least one copy target; at most `max_windows`."""
    from termagent.train.sft import context_windows  # here, not at the top: sft imports this module

    rng = random.Random(seed)
    named = [c for c in conversations if c and entity_names(c[0]["content"].split("\nTask:\n", 1)[-1])]
    rng.shuffle(named)
    numbers = number_token_ids(tokenizer)
    out: list[dict] = []
    for conversation in named:
        for w in context_windows(tokenizer, [rename_conversation(conversation, rng)], context):
            sources = copy_sources(w["input_ids"], w["assistant_masks"], numbers)
            if sources:
                out.append({"input_ids": w["input_ids"], "targets": list(sources), "sources": list(sources.values())})
        if len(out) >= max_windows:
            break
    return out[:max_windows]


@torch.no_grad()
def copy_accuracy(model, windows: list[dict], *, pad_id: int, batch_size: int = 32) -> float | None:
    """Greedy next-token accuracy over the windows' copy targets (None: no target)."""
    was_training = model.training
    model.eval()
    right = total = 0
    device = next(model.parameters()).device
    try:
        for start in range(0, len(windows), batch_size):
            chunk = windows[start : start + batch_size]
            width = max(len(w["input_ids"]) for w in chunk)
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            for row, w in enumerate(chunk):  # right padding: no target position of a causal model sees it
                ids[row, : len(w["input_ids"])] = torch.tensor(w["input_ids"])
            ids = ids.to(device)
            predicted = model(input_ids=ids).logits.argmax(-1)
            for row, w in enumerate(chunk):
                at = torch.tensor(w["targets"], device=device)
                right += int((predicted[row, at - 1] == ids[row, at]).sum())
                total += len(w["targets"])
    finally:
        model.train(was_training)
    return right / total if total else None


class CopyMonitor(TrainerCallback):
    """Every `every` optimizer steps: the held-out copy accuracy, to `live` (a dvclive Live, the stage's) at
    step `step_offset + global_step`, and the end of training at the first value >= `target` (0: never)."""

    def __init__(self, windows: list[dict], *, every: int, target: float, pad_id: int, live=None,
                 step_offset: int = 0):
        if every < 1:
            raise ValueError(f"CopyMonitor: every must be >= 1, got {every}")
        self.windows, self.every, self.target, self.pad_id = windows, every, target, pad_id
        self.live, self.step_offset = live, step_offset
        self.history: list[tuple[int, float]] = []
        self.reached_step: int | None = None

    def measure(self, model, step: int) -> float | None:
        value = copy_accuracy(model, self.windows, pad_id=self.pad_id)
        if value is None:
            return None
        self.history.append((step, round(value, 4)))
        if self.live is not None:
            self.live.step = self.step_offset + step
            self.live.log_metric("copy/number_accuracy", value)
        return value

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.measure(model, state.global_step)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every:
            return control
        value = self.measure(model, state.global_step)
        if self.target and value is not None and value >= self.target and self.reached_step is None:
            self.reached_step = state.global_step
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if not self.history or self.history[-1][0] != state.global_step:  # the phase's last step, measured
            self.measure(model, state.global_step)

    def summary(self) -> dict[str, Any]:
        return {"copy_windows": len(self.windows), "copy_targets": sum(len(w["targets"]) for w in self.windows),
                "copy_target": self.target or None, "copy_reached_step": self.reached_step,
                "copy_accuracy_last": self.history[-1][1] if self.history else None,
                "copy_accuracy": [list(p) for p in self.history]}
