"""scripts/bench_learns.py run in parts: a run adds to the file it finds only for the same start (by the adapter's
weights), steps, generation path and trainer configuration, and never writes over another configuration's results."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_learns import merge


def doc(adapter_sha="a1", grpo_config="g1", mt_config="m1", **sections):
    return {"start": {"base": "models/base", "adapter": "models/warmup", "adapter_sha256": adapter_sha},
            "steps": 10, "generation": {"engine": True}, "config": {"grpo": grpo_config, "mt_grpo": mt_config},
            "grpo": {}, "mt_grpo": {}, "minutes": {}, **sections}


def test_a_later_part_keeps_the_earlier_results_of_the_same_start_and_configuration():
    earlier = doc(grpo={"t2": {"verdict": {"passed": True}, "task": {"id": "background-job-0011", "rate": 0.5}}},
                  mt_grpo={"t2": {"verdict": {"passed": False}}}, minutes={"t2-grpo": 13.8})
    later = doc()
    later["start"]["adapter"] = "/tmp/bench_learns/start"  # a copy of the same weights
    merge(earlier, later, Path("b.json"), {"grpo", "mt_grpo"})
    assert later["grpo"] == earlier["grpo"] and later["mt_grpo"] == earlier["mt_grpo"]
    assert later["grpo"]["t2"]["task"]["id"] == "background-job-0011" and later["minutes"] == {"t2-grpo": 13.8}


@pytest.mark.parametrize("later", [doc(adapter_sha="other"), doc(grpo_config="g2")])
def test_another_start_or_trainer_configuration_is_refused_not_written_over(later):
    earlier = doc(grpo={"t1": {"verdict": {"passed": True}}})
    with pytest.raises(click.ClickException, match="--replace"):
        merge(earlier, later, Path("b.json"), {"grpo"})


def test_a_trainer_this_run_leaves_alone_keeps_its_results_and_their_configuration():
    earlier = doc(grpo_config="g0", grpo={"t1": {"verdict": {"passed": True}}})  # GRPO measured at another config
    later = doc()  # runs t1-mt only
    merge(earlier, later, Path("b.json"), {"mt_grpo"})
    assert later["grpo"] == earlier["grpo"] and later["config"]["grpo"] == "g0" and later["config"]["mt_grpo"] == "m1"
