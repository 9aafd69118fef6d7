"""The warmup's held-out copy measure (termagent.train.copy_monitor): which tokens it scores, what it measures
on a real model, and that it ends a real SFTTrainer run at its target and logs the curve to dvclive."""

from __future__ import annotations

import json

import pytest
import torch

from termagent.train.common import load_model, load_tokenizer, read_dvclive_series
from termagent.train.copy_monitor import (
    CopyMonitor,
    copy_accuracy,
    copy_sources,
    copy_target_mask,
    copy_targets,
    held_out_windows,
)
from termagent.train.sft import SFTParams, train_sft


def test_copy_targets_are_numbers_in_the_reply_whose_pair_came_earlier():
    # tokens: 7 = a word, 50/51 = numbers; the mask marks the reply (positions 5..)
    ids = [7, 50, 3, 8, 51, 7, 50, 8, 52, 9, 51]
    mask = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    # 6: (7, 50) seen at 0-1 -> a copy; 8: (8, 52) never seen; 10: (9, 51) never seen; 1 and 4: not the reply
    assert copy_targets(ids, mask, {50, 51, 52}) == [6]
    assert copy_targets(ids, [1] * len(ids), {50, 51, 52}) == [6]  # the first (7, 50) has no earlier pair
    assert copy_targets(ids, mask, set()) == []


def test_copy_sources_point_at_the_latest_earlier_occurrence_of_the_pair():
    ids = [7, 50, 3, 7, 50, 8, 7, 50]
    mask = [0, 0, 0, 0, 0, 1, 1, 1]
    assert copy_sources(ids, mask, {50}) == {7: 4}  # (7, 50) at 0-1 and 3-4: a copy reads the later one
    assert copy_sources(ids, [1] * len(ids), {50}) == {4: 1, 7: 4}


def test_the_batched_copy_target_mask_marks_what_copy_targets_lists():
    rows = [([7, 50, 3, 8, 51, 7, 50, 8, 52, 9, 51], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]),
            ([8, 51, 8, 51, 7, 50, 7, 50, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0])]  # right-padded with 0
    numbers = {50, 51, 52}
    mask = copy_target_mask(torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows]),
                            torch.tensor(sorted(numbers)))
    for row, (ids, labelled) in enumerate(rows):
        assert torch.nonzero(mask[row]).flatten().tolist() == copy_targets(ids, labelled, numbers)
    assert torch.nonzero(mask[1]).flatten().tolist() == [3, 7]  # each pair's second occurrence


def _windows(copies: int = 4) -> list[dict]:
    """A window whose reply repeats a (word, number) pair of its context: one target each."""
    ids = [11, 12, 13, 40, 41, 14, 15, 40, 41, 16]
    return [{"input_ids": ids, "targets": [8]} for _ in range(copies)]


def test_copy_accuracy_is_greedy_accuracy_at_the_targets(tiny_model_dir):
    """Windows whose target token is, or is not, the model's own greedy prediction at that position (a causal
    model's logits at t - 1 do not depend on the token at t): the accuracy is the known share of right ones."""
    model = load_model(tiny_model_dir, trainable=False)

    def window(prefix: list[int], right: bool) -> dict:
        greedy = int(model(input_ids=torch.tensor([prefix])).logits[0, -1].argmax())
        return {"input_ids": prefix + [greedy if right else (greedy + 1) % 100 + 3, 16], "targets": [len(prefix)]}

    long_prefix, short_prefix = [11, 12, 13, 40, 41, 14, 15, 40], [11, 40, 41, 40]
    right, wrong = window(long_prefix, True), window(long_prefix, False)
    assert copy_accuracy(model, [right], pad_id=0) == 1.0
    assert copy_accuracy(model, [wrong], pad_id=0) == 0.0
    assert copy_accuracy(model, [right, wrong, wrong, right], pad_id=0) == 0.5
    # a shorter window padded into the batch changes nothing (right padding, causal model)
    short = window(short_prefix, True)
    assert copy_accuracy(model, [short, right, wrong], pad_id=0, batch_size=4) == pytest.approx(2 / 3)
    assert copy_accuracy(model, [wrong, short, wrong, wrong], pad_id=0, batch_size=2) == 0.25
    assert copy_accuracy(model, [], pad_id=0) is None


def test_held_out_windows_rename_the_demos_and_keep_only_copyable_numbers():
    from termagent.models.tiny import train_tokenizer
    from termagent.train.augment import entity_names

    # a stems tokenizer, as the embedded base model's: every `_NN` piece a token of its own
    tokenizer = train_tokenizer([f"cat /app/harbor_{n}.log" for n in range(10, 100)] * 2, vocab_size=600,
                                split="stems")
    reply = json.dumps({"analysis": "a", "plan": "b", "commands": [{"keystrokes": "cat /app/harbor_78.log\n",
                                                                    "duration": 0.1}], "task_complete": False})
    conversation = [{"role": "user", "content": "Protocol text.\nTask:\nPrint /app/harbor_78.log.\n"},
                    {"role": "assistant", "content": reply}]
    unnamed = [{"role": "user", "content": "Protocol text.\nTask:\nList /app.\n"},
               {"role": "assistant", "content": reply.replace("harbor_78.log", "x")}]
    windows = held_out_windows(tokenizer, [conversation, unnamed], context=64, seed=1, max_windows=8)
    assert len(windows) == 1  # the unnamed task has nothing to copy
    text = tokenizer.decode(windows[0]["input_ids"])
    assert "harbor_78" not in text and len(entity_names(text)) >= 1  # renamed, still a pool name
    (target,) = windows[0]["targets"]
    (source,) = windows[0]["sources"]  # the task's number, the token a copy reads
    assert source < target and windows[0]["input_ids"][source - 1:source + 1] == windows[0]["input_ids"][target - 1:target + 1]
    number = tokenizer.convert_ids_to_tokens(windows[0]["input_ids"][target])
    assert number.startswith("_") and number[1:].isdigit() and f"{number}.log" in text.split("Task:")[-1]


def _train(tiny_model_dir, tmp_path, monkeypatch, target: float, steps: int = 30):
    """A real warmup-shaped run (full fine-tune, window phase) on one conversation, the copy measured every
    2 steps on a held-out window that memorising the conversation makes right."""
    conversation = [{"role": "user", "content": "Task:\nPrint /app/x.\n"},
                    {"role": "assistant", "content": "cat /app/x"}]
    demos = tmp_path / "demos.jsonl"
    demos.write_text(json.dumps({"conversations": conversation}) + "\n")
    tokenizer = load_tokenizer(tiny_model_dir)
    ids = tokenizer.apply_chat_template(conversation, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    held = [{"input_ids": ids, "targets": [len(ids) - 3]}]  # a reply token the run will learn
    from termagent.train import sft

    monkeypatch.setattr(sft, "held_out_windows", lambda *a, **k: held)  # the held-out set: this window
    params = SFTParams(datasets=[str(demos)], max_length=256, max_steps=steps, full_finetune=True,
                       learning_rate=1e-2, warmup_ratio=0.0, gradient_accumulation_steps=1, logging_steps=1,
                       window_epochs=1.0, window_context=64, window_batch_size=1, window_lr_scheduler_type="constant",
                       window_copy_eval_every=2, window_copy_target=target)
    return train_sft(tiny_model_dir, tmp_path / "model", params, metrics_dir=tmp_path / "metrics", stage="warmup")


def test_the_window_phase_ends_at_the_copy_target_and_logs_the_curve(tiny_model_dir, tmp_path, monkeypatch):
    metrics = _train(tiny_model_dir, tmp_path, monkeypatch, target=1.0)
    windows = metrics["windows"]
    assert windows["copy_reached_step"] is not None and windows["steps"] == windows["copy_reached_step"] < 30
    assert windows["copy_accuracy_last"] == 1.0 and windows["copy_accuracy"][0] == [0, 0.0]
    curve = read_dvclive_series(tmp_path / "metrics")["copy/number_accuracy"]
    assert [s for s, _ in curve] == list(range(0, windows["steps"] + 1, 2))  # every 2 steps from the start
    assert "copy_accuracy_after_conversations" in windows


def test_without_a_target_the_window_phase_runs_its_budget(tiny_model_dir, tmp_path, monkeypatch):
    metrics = _train(tiny_model_dir, tmp_path, monkeypatch, target=0.0, steps=8)
    windows = metrics["windows"]
    assert windows["steps"] == 8 and windows["copy_reached_step"] is None
    assert [s for s, _ in windows["copy_accuracy"]] == [0, 2, 4, 6, 8]


def test_copy_params_are_checked():
    with pytest.raises(ValueError, match="needs window_copy_eval_every"):
        SFTParams(window_copy_target=0.5)
    with pytest.raises(ValueError, match=r"window_copy_target in \[0, 1\]"):
        SFTParams(window_copy_eval_every=10, window_copy_target=1.5)
    monitor = CopyMonitor(_windows(1), every=5, target=0.0, pad_id=0)
    assert monitor.summary()["copy_target"] is None
    with pytest.raises(ValueError, match="every must be >= 1"):
        CopyMonitor(_windows(1), every=0, target=0.0, pad_id=0)
