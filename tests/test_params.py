import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import click
import pytest
import yaml

from termagent.params import ParamsError, load_params, read_sections, section
from termagent.tasks.index import TasksConfig


@dataclass
class Demo:
    n: int
    rate: float = 0.5
    mode: Literal["a", "b"] = "a"
    names: list[str] = field(default_factory=list)
    limit: int | None = None


def test_section_builds_and_coerces_int_to_float():
    cfg = section({"demo": {"n": 3, "rate": 1, "names": ["x"]}}, "demo", Demo)
    assert cfg == Demo(n=3, rate=1.0, names=["x"])
    assert isinstance(cfg.rate, float)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"n": "three"}, "params.yaml: demo.n must be int, got 'three'"),
        ({"n": 1, "mode": "c"}, "demo.mode must be one of ['a', 'b']"),
        ({"n": 1, "typo": 2}, "unknown key(s) ['typo']"),
        ({}, "missing key(s) ['n']"),
        ({"n": True}, "demo.n must be int"),
        ({"n": 1, "names": "x"}, "demo.names must be a list"),
    ],
)
def test_section_errors_name_the_key(data, message):
    with pytest.raises(ParamsError) as exc:
        section({"demo": data}, "demo", Demo)
    assert message in str(exc.value)


def test_load_params_reports_file(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(ParamsError, match="invalid YAML"):
        load_params(bad)
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "missing.yaml")


def test_repository_params_file_loads():
    params = load_params("params.yaml")
    assert "sandbox" in params and "tasks" in params


@dataclass
class Checked:
    fraction: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.fraction < 1:
            raise ValueError(f"fraction must be > 0 and < 1, got {self.fraction}")


def test_a_configs_own_check_names_the_file_and_section():
    with pytest.raises(ParamsError) as exc:
        section({"split": {"fraction": 1.5}}, "split", Checked, file="profiles/x.yaml")
    assert str(exc.value) == "profiles/x.yaml: split: fraction must be > 0 and < 1, got 1.5"


# The whole file checked at load, on real copies of the repository's params.yaml.

REPO = Path(__file__).resolve().parents[1]


def params_copy(tmp_path: Path, edit) -> Path:
    """params.yaml copied into tmp_path with `edit(dict)` applied."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda p: p.update(evl={"attempts": 1}),
         "params.yaml: evl: unknown top-level key (did you mean 'eval'?); known: ['seed', 'sandbox'"),
        (lambda p: p["eval"].update(atempts=2), "params.yaml: eval: unknown key(s) ['atempts'] (did you mean"),
        (lambda p: p["sft"]["trl"].update(adam_beta1="fast"), "params.yaml: sft.trl.adam_beta1 must be float, got 'fast'"),
        (lambda p: p["dpo"]["trl"].update(beta="high"), "params.yaml: dpo.trl.beta must be float, got 'high'"),
        (lambda p: p["grpo"]["trl"].update(learnin_rate=1e-4),
         "params.yaml: grpo.trl.learnin_rate: not a field of trl.GRPOConfig (did you mean 'learning_rate'?)"),
        (lambda p: p.update(seed="one"), "params.yaml: seed must be int, got 'one'"),
        (lambda p: p["base_model"].update(tiny={"hidden_size": "big"}), "base_model.tiny.hidden_size must be int"),
    ],
)
def test_loading_checks_the_whole_file(tmp_path, edit, message):
    path = params_copy(tmp_path, edit)
    with pytest.raises(ParamsError) as exc:
        load_params(path)
    assert message.replace("params.yaml", str(path)) in str(exc.value)


def test_every_problem_is_reported_at_once(tmp_path):
    def two_typos(params):
        params["evl"] = {}
        params["sft"]["trl"]["adam_beta1"] = "fast"

    with pytest.raises(ParamsError) as exc:
        load_params(params_copy(tmp_path, two_typos))
    lines = str(exc.value).splitlines()
    assert any("evl: unknown top-level key" in line for line in lines)
    assert any("sft.trl.adam_beta1 must be float" in line for line in lines)


def test_a_stage_reading_one_section_stops_on_a_typo_in_another(tmp_path):
    """read_sections (what every stage calls first) checks the whole file: the tasks stage, which reads only
    `tasks`, refuses an `eval:` typo instead of letting it surface when the evals start."""
    path = params_copy(tmp_path, lambda p: p["eval"].update(max_per_splitt=3))
    with pytest.raises(click.ClickException) as exc:
        read_sections(path, None, tasks=TasksConfig)
    assert f"{path}: eval: unknown key(s) ['max_per_splitt'] (did you mean 'max_per_split'?)" in exc.value.message


def test_the_tasks_stage_fails_before_doing_anything(tmp_path):
    path = params_copy(tmp_path, lambda p: p.update(evl={}))
    out = tmp_path / "tasks.json"
    run = subprocess.run([sys.executable, str(REPO / "stages/tasks.py"), "--params", str(path), "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode != 0
    assert f"{path}: evl: unknown top-level key (did you mean 'eval'?)" in run.stderr
    assert not out.exists()


@pytest.mark.parametrize("profile", sorted(p.name for p in (REPO / "profiles").glob("*.yaml")))
def test_every_committed_profile_validates(profile):
    params = load_params(REPO / "params.yaml", REPO / "profiles" / profile)
    assert "sandbox" in params


@pytest.mark.parametrize(
    "profile_text, message",
    [
        ("evl:\n  attempts: 1\n", "profile key evl does not exist in params.yaml (did you mean 'eval'?)"),
        ("sft:\n  max_steps: many\n", "sft.max_steps must be int, got 'many'"),
        ("sft:\n  trl:\n    weight_decay: none\n", "sft.trl.weight_decay must be float, got 'none'"),
    ],
)
def test_a_profile_is_checked_merged_over_params(tmp_path, profile_text, message):
    profile = tmp_path / "broken.yaml"
    profile.write_text(profile_text)
    with pytest.raises(ParamsError) as exc:
        load_params(REPO / "params.yaml", profile)
    assert str(profile) in str(exc.value)
    assert message in str(exc.value)
