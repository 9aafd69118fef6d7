"""The report compares models per split group with the paired bootstrap CI of the group's tasks."""

from __future__ import annotations

from termagent.report.build import build_summary, comparison_markdown, metrics_view


def metrics(model: str, id_rates: dict, ood_rates: dict) -> dict:
    def part(rates):
        return {"n_tasks": len(rates), "n_attempts": 1, "accuracy": sum(rates.values()) / len(rates),
                "accuracy_stderr": 0.0, "per_task": rates}

    everything = {**id_rates, **ood_rates}
    return {**part(everything), "model": model, "by_split": {"eval_id": part(id_rates), "eval_ood": part(ood_rates)}}


def test_per_group_comparisons():
    ids = [f"f-{i}" for i in range(12)]
    oods = [f"o-{i}" for i in range(6)]
    base = metrics("base", dict.fromkeys(ids, 0.0), dict.fromkeys(oods, 0.0))
    sft = metrics("sft", dict.fromkeys(ids, 1.0), dict.fromkeys(oods, 0.0))
    summary = build_summary({"base": base, "sft": sft}, base="base", n_resamples=500, confidence=0.95, seed=0)
    by = summary["by_split"]
    assert set(by) == {"eval_id", "eval_ood"}
    assert by["eval_id"]["comparisons"]["sft"]["n_tasks"] == 12 and by["eval_id"]["comparisons"]["sft"]["ci_low"] > 0
    assert by["eval_ood"]["comparisons"]["sft"]["diff"] == 0.0 and by["eval_ood"]["comparisons"]["sft"]["n_tasks"] == 6
    assert by["eval_id"]["models"]["sft"]["n_solved"] == 12
    text = comparison_markdown(summary)
    assert "## Split group `eval_id`" in text and "better" in text and "no detectable difference" in text
    assert "by_split" not in metrics_view(summary)  # the groups' numbers are in each eval's own metrics file


def test_metrics_without_groups_still_report():
    plain = {"n_tasks": 2, "n_attempts": 1, "accuracy": 0.5, "accuracy_stderr": 0.0, "per_task": {"a": 1.0, "b": 0.0}}
    summary = build_summary({"base": plain, "x": plain}, base="base", n_resamples=100, confidence=0.9, seed=0)
    assert summary["by_split"] == {}


def test_each_model_is_compared_with_the_model_it_starts_from():
    ids = [f"f-{i}" for i in range(12)]
    oods = [f"o-{i}" for i in range(4)]

    def rated(model, solved):  # the first `solved` eval_id tasks pass
        return metrics(model, {t: float(i < solved) for i, t in enumerate(ids)}, dict.fromkeys(oods, 0.0))

    # dpo was not evaluated (no pair: the SFT adapter), so mt_grpo is compared with sft
    evaluated = {"base": rated("base", 0), "warmup": rated("warmup", 2), "grpo": rated("grpo", 2),
                 "sft": rated("sft", 10), "mt_grpo": rated("mt_grpo", 10)}
    summary = build_summary(evaluated, base="base", n_resamples=500, confidence=0.95, seed=0)
    against = summary["against_start"]
    assert {m: a["start"] for m, a in against.items()} == {"warmup": "base", "grpo": "warmup", "sft": "warmup",
                                                           "mt_grpo": "sft"}
    assert against["sft"]["by_split"]["eval_id"]["diff"] == 8 / 12 and against["sft"]["by_split"]["eval_id"]["ci_low"] > 0
    assert against["grpo"]["all"]["diff"] == 0.0 and against["mt_grpo"]["all"]["ci_low"] == 0.0
    text = comparison_markdown(summary)
    assert "| sft | warmup | eval_id | 12 | 0.833 | 0.167 | +0.667 |" in text
    assert "| mt_grpo | sft | all |" in text
    assert metrics_view(summary)["vs_start"]["sft"] == {k: against["sft"]["all"][k] for k in ("diff", "ci_low",
                                                                                               "ci_high")}
    # a warmup that was off: GRPO and SFT are compared with the base
    off = build_summary({k: v for k, v in evaluated.items() if k != "warmup"}, base="base", n_resamples=100,
                        confidence=0.95, seed=0)["against_start"]
    assert off["grpo"]["start"] == "base" and off["sft"]["start"] == "base"
