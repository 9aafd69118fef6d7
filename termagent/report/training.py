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
    config = g.get("config") or {}
    return (f"{g.get('steps', '—')} steps over {g.get('n_rollouts', '—')} replies on {g.get('tasks', '—')} tasks: "
            f"valid JSON {_num(g.get('valid_json_rate'), '.2f')}, "
            f"verifier pass {_num(g.get('verifier_pass_rate'), '.3f')}, "
            f"{g.get('groups_signal', '—')}/{g.get('groups', '—')} groups drawn with a pass and a fail, "
            f"**{_num(g.get('trained_groups_signal_frac'), '.2f')} of the groups trained on** after "
            f"{g.get('resampled_groups', 0)} resampled (the others carry no gradient), learning-rate mass {_num(lr_mass(config), '.2e')}, "
            f"{g.get('n_infra_failures', 0)} infrastructure failures")


def lr_mass(config: dict) -> float | None:
    """learning rate x optimizer steps (the schedule's shape aside): how far a stage may move its adapter."""
    lr, steps = config.get("learning_rate", (config.get("trl") or {}).get("learning_rate")), config.get("max_steps")
    return lr * steps if lr and steps and steps > 0 else None


def _sample_row(r: dict) -> str:
    m = r.get("summary") or {}
    return (f"`{r.get('model')}` at temperature {r.get('temperature')}: {m.get('tasks', '—')} train tasks x "
            f"{r.get('attempts', '—')}, pass rate {_num(m.get('pass_rate'), '.3f')}; **{m.get('tasks_mixed', '—')} "
            f"tasks with a pass and a fail**, {m.get('tasks_all_pass', '—')} always, {m.get('tasks_all_fail', '—')} "
            f"never solved; {m.get('infra_failures', 0)} infrastructure failures")


def _datasets_row(d: dict) -> str:
    c = d.get("counts") or {}
    return (f"rft_sft {c.get('rft_sft.jsonl', '—')} verified passing trajectories, dpo_turns "
            f"{c.get('dpo_turns.jsonl', '—')} divergent-turn pairs, dpo_filtered {c.get('dpo_filtered.jsonl', '—')} "
            f"GRPO pairs, api_sft {c.get('api_sft.jsonl', '—')} rows")


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
    signal = " / ".join(_num(f, ".2f") for f in m.get("signal_groups_frac") or []) or "—"
    nonzero = " / ".join(_num(f, ".2f") for f in m.get("outcome_nonzero_groups_frac") or []) or "—"
    return (f"{m.get('steps', '—')} steps, outcome reward mean per step {rewards}, **groups with a pass and a fail "
            f"{signal}**, groups with a non-zero outcome {nonzero}, filtered {filtered}; "
            f"turns reaching the loss token-identical {m.get('clean_turns', '—')}, "
            f"drifted {m.get('drift_turns', '—')}")


_ROWS = {"warmup": _warmup_row, "sample_warmup": _sample_row, "grpo": _grpo_row, "datasets": _datasets_row,
         "sft": _sft_row, "dpo": _dpo_row, "sample_dpo": _sample_row, "mt_grpo": _mt_grpo_row}


def mechanism_figures(train: dict[str, dict]) -> dict[str, dict]:
    """Per stage, the numbers that say whether it had something to learn from (metrics/summary.json)."""
    out: dict[str, dict] = {}
    for name in ("sample_warmup", "sample_dpo"):
        if (r := train.get(name)) and r.get("summary"):
            m = r["summary"]
            out[name] = {k: m.get(k) for k in ("tasks", "episodes", "pass_rate", "tasks_mixed", "tasks_all_pass",
                                                "tasks_all_fail", "infra_failures")}
    if g := train.get("grpo"):
        out["grpo"] = {"groups": g.get("groups"), "groups_signal": g.get("groups_signal"),
                       "groups_signal_frac": g.get("groups_signal_frac"), "verifier_pass_rate": g.get("verifier_pass_rate"),
                       "trained_groups_signal_frac": g.get("trained_groups_signal_frac"),
                       "resampled_groups": g.get("resampled_groups"),
                       "tasks": g.get("tasks"), "lr_mass": lr_mass(g.get("config") or {})}
    if d := train.get("datasets"):
        out["datasets"] = {k: (d.get("counts") or {}).get(k) for k in ("rft_sft.jsonl", "dpo_turns.jsonl",
                                                                       "dpo_filtered.jsonl", "api_sft.jsonl")}
    if s := train.get("sft"):
        out["sft"] = {"conversations": s.get("n_conversations"), "steps": s.get("global_steps"),
                      "datasets": s.get("datasets")}
    if d := train.get("dpo"):
        out["dpo"] = {"pairs_used": (d.get("pairs") or {}).get("used", 0), "skipped": bool(d.get("skipped")),
                      "steps": d.get("global_steps"), "last_reward_accuracy": d.get("last_reward_accuracy")}
    if m := train.get("mt_grpo"):
        out["mt_grpo"] = {k: m.get(k) for k in ("steps", "reward_mean", "signal_groups_frac",
                                                 "outcome_nonzero_groups_frac", "filtered_frac")}
    return out


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
