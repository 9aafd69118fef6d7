"""evaluate_model: the one eval entry (stages/eval.py only parses options and calls it). The full local
run is `dvc repro eval@base`; tests/evaluate/test_eval_e2e.py covers its pieces on a real container."""

from pathlib import Path

import pytest

from termagent.agent import AgentConfig
from termagent.evaluate.config import EvalConfig, HarborConfig, TB1Config
from termagent.evaluate.model import evaluate_model
from termagent.evaluate.outputs import official_protocol
from termagent.sandbox import SandboxParams
from termagent.serve import ServeConfig

REPO = Path(__file__).resolve().parents[2]


def test_an_empty_split_is_an_error_naming_the_index_before_any_container(tmp_path):
    with pytest.raises(ValueError, match=r"data/tasks.json: no task in split \['nosuch'\]"):
        evaluate_model("base", EvalConfig(split=["nosuch"], models={}), agent=AgentConfig(), sandbox=SandboxParams(),
                       serve=ServeConfig(), tasks_index=REPO / "data/tasks.json", image_record=REPO / "data/image.json",
                       out_dir=tmp_path / "out", metrics_path=tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_official_protocols_come_from_their_sections():
    harbor = official_protocol("harbor", HarborConfig(max_output_tokens=4096))
    assert harbor["max_output_tokens"] == 4096 and harbor["agent"] == "harbor terminus-2 (terminal-bench@2.0)"
    tb1 = official_protocol("tb1", TB1Config(temperature=0.2))
    assert tb1["temperature"] == 0.2 and tb1["max_input_tokens"] is None and tb1["agent"].startswith("tb terminus-2")
