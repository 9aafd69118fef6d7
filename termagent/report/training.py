"""What the training stages reported, next to the eval verdicts: the numbers that explain a verdict.

An eval that cannot tell a trained model from the base has two readings: the training did not move the model,
or the eval cannot see what moved. The stages' own metrics (`metrics/<stage>/train.json`) tell them apart, so
the report puts the ones that decide it beside the comparison: how far the warmup's loss fell, how many GRPO
groups carried a gradient (reward std > 0), how many preference pairs DPO had, what MT-GRPO's trajectories
scored and how many turns reached the loss token-identical.
"""

from __future__ import annotations

import json
from pathlib import Path


def load_training_metrics(paths: list[Path]) -> dict[str, dict]:
    """{stage: train.json} for the given files, keyed by their `stage` field (else the parent folder)."""
    out: dict[str, dict] = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error.msg})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a training metrics file holds a JSON object, not {type(data).__name__}")  # noqa: TRY004 (bad input: the stage turns ValueError into its error)
        out[str(data.get("stage") or Path(path).parent.name)] = data
    return out


def _num(value, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _warmup_row(w: dict) -> str:
    if w.get("enabled") is False:
        return f"**off**: {w.get('skipped') or 'warmup.enabled false'}"
    return _sft_row(w)


def _grpo_row(g: dict) -> str:
    return (f"{g.get('steps', '—')} steps over {g.get('n_rollouts', '—')} replies: "
            f"valid JSON {_num(g.get('valid_json_rate'), '.2f')}, "
            f"verifier pass {_num(g.get('verifier_pass_rate'), '.3f')}, "
            f"{g.get('groups_nonzero_std', '—')}/{g.get('groups', '—')} groups with reward std > 0 "
            f"(the others carry no gradient), {g.get('n_infra_failures', 0)} infrastructure failures")


def _sft_row(s: dict) -> str:
    return (f"{s.get('global_steps', '—')} steps over {s.get('n_conversations', '—')} conversations, "
            f"loss {_num(s.get('first_loss'))} -> {_num(s.get('last_loss'))} (mean {_num(s.get('train_loss'))})")


def _dpo_row(d: dict) -> str:
    if d.get("skipped"):
        return "**skipped**: no preference pair (the `dpo` model is the SFT adapter)"
    return f"{(d.get('pairs') or {}).get('used')} pairs, {d.get('global_steps', '—')} steps"


def _mt_grpo_row(m: dict) -> str:
    rewards = " / ".join(_num(r, ".2f") for r in m.get("reward_mean") or []) or "—"
    filtered = " / ".join(_num(f, ".2f") for f in m.get("filtered_frac") or []) or "—"
    return (f"{m.get('steps', '—')} steps, outcome reward mean per step {rewards}, filtered {filtered}; "
            f"turns reaching the loss token-identical {m.get('clean_turns', '—')}, "
            f"drifted {m.get('drift_turns', '—')}")


_ROWS = {"warmup": _warmup_row, "grpo": _grpo_row, "sft": _sft_row, "dpo": _dpo_row, "mt_grpo": _mt_grpo_row}


def training_rows(train: dict[str, dict]) -> list[tuple[str, str]]:
    """(stage, what it reported) for the stages present, in pipeline order."""
    return [(stage, row(train[stage])) for stage, row in _ROWS.items() if train.get(stage)]


def training_markdown(train: dict[str, dict]) -> str:
    """The section comparison.md ends with ("" without training metrics)."""
    rows = training_rows(train)
    if not rows:
        return ""
    lines = ["## What the training stages reported", "",
             "From `metrics/<stage>/train.json`: what decides whether a verdict above could have been \"better\".",
             "", "| stage | reported |", "| --- | --- |"]
    lines += [f"| {stage} | {text} |" for stage, text in rows]
    return "\n".join(lines) + "\n"
