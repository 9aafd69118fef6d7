"""Each RL stage against its start on the held-out instances of the families it trained on (issue 41's measure).

    gains = family_gains(details, {"grpo": ["chmod-mode", "grep-count"], "mt_grpo": ["chmod-mode"]},
                         n_resamples=10000, confidence=0.95, seed=0)

A task's score is the mean over every attempt of the eval (its own attempts and eval.sampled's): with k sampled
attempts it lies in {0, 1/(k+1), ..., 1}, so a stage that makes a task pass more often shows where a greedy 0/1
cannot. Each gain is a paired bootstrap over tasks (termagent.report.compare.paired_bootstrap) on the eval_id
instances of the trained families, beside the same on the whole eval_id; the families come from train tasks only
(termagent.trained), the eval tasks were fixed before training (eval.max_per_split, termagent.tasks.split).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from termagent.report.compare import effective_start, paired_bootstrap

# gain name -> (model, start, the stages whose families count): GRPO from the warmup, MT-GRPO from DPO, and the final
# model from the warmup on the families either RL stage trained on
RL_GAINS = {"grpo": ("grpo", "warmup", ("grpo",)), "mt_grpo": ("mt_grpo", "dpo", ("mt_grpo",)),
            "final": ("mt_grpo", "warmup", ("grpo", "mt_grpo"))}


def attempt_means(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{task: {"family", "score"}} over the eval's primary set (eval_id): the mean over all its attempts."""
    primary = details.get("primary", "all")
    out = {}
    for task, o in (details.get("outcomes") or {}).items():
        if primary != "all" and o.get("split") != primary:
            continue
        values = [*(o.get("attempts") or {}).values(), *(o.get("sampled") or {}).values()]
        if values:
            out[task] = {"family": o.get("family"), "score": sum(values) / len(values)}
    return out


def family_gains(details: dict[str, dict], trained: dict[str, list[str]], *, n_resamples: int, confidence: float,
                 seed: int) -> dict[str, dict[str, Any]]:
    """{gain: {"model", "start", "families", "trained": comparison, "all": comparison}} for each of RL_GAINS whose
    model was evaluated and whose stages recorded their families (`trained`). A start that was not evaluated (a
    warmup that was off, a DPO without a pair) is replaced by its own nearest evaluated start, as in the report's
    `against_start`."""
    out: dict[str, dict[str, Any]] = {}
    for name, (model, start, stages) in RL_GAINS.items():
        if start not in details:
            start = effective_start(start, set(details))
        if model not in details or start is None or not all(s in trained for s in stages):
            continue
        families = sorted({f for s in stages for f in trained[s]})
        m, s = attempt_means(details[model]), attempt_means(details[start])
        kw = {"model": model, "base": start, "n_resamples": n_resamples, "confidence": confidence, "seed": seed}
        whole = asdict(paired_bootstrap({t: x["score"] for t, x in m.items()},
                                        {t: x["score"] for t, x in s.items()}, **kw))
        in_families = {t for t, x in m.items() if x["family"] in families}
        out[name] = {"model": model, "start": start, "families": families, "all": whole,
                     "trained": (asdict(paired_bootstrap({t: m[t]["score"] for t in in_families},
                                                         {t: x["score"] for t, x in s.items() if t in in_families},
                                                         **kw))
                                 if in_families & set(s) else None)}
    return out


def gains_markdown(gains: dict[str, dict[str, Any]]) -> str:
    """The comparison.md section ("" without gains)."""
    if not gains:
        return ""
    lines = ["## Each RL stage on the families it trained on", "",
             ("Per task, the mean over every attempt (the eval's own and the sampled ones); paired bootstrap over "
              "the eval_id tasks of the trained families, and over the whole eval_id."), "",
             "| gain | model | start | families | tasks | model's | start's | diff | CI low | CI high | whole eval_id |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, g in gains.items():
        a, c = g["all"], g["trained"]
        whole = f"{a['diff']:+.3f} [{a['ci_low']:+.3f}, {a['ci_high']:+.3f}] on {a['n_tasks']}"
        if c is None:
            lines.append(f"| {name} | {g['model']} | {g['start']} | {', '.join(g['families'])} | 0 | | | | | | {whole} |")
            continue
        lines.append(f"| {name} | {g['model']} | {g['start']} | {', '.join(g['families'])} | {c['n_tasks']} "
                     f"| {c['accuracy']:.3f} | {c['base_accuracy']:.3f} | {c['diff']:+.3f} | {c['ci_low']:+.3f} "
                     f"| {c['ci_high']:+.3f} | {whole} |")
    return "\n".join(lines) + "\n"
