from pathlib import Path
from types import SimpleNamespace

import pytest

from termagent.agent import AgentConfig
from termagent.evaluate.config import EvalConfig, ReportConfig
from termagent.evaluate.outputs import local_protocol
from termagent.evaluate.trajectories import trajectory_from_trial
from termagent.params import ParamsError, load_params, section

REPO = Path(__file__).resolve().parents[2]


def test_repository_eval_and_report_sections_parse():
    params = load_params(REPO / "params.yaml")
    cfg = section(params, "eval", EvalConfig)
    assert section(params, "agent", AgentConfig).max_turns >= 1
    assert cfg.backend == "local" and cfg.attempts >= 1 and cfg.harbor.max_input_tokens > 0
    assert section(params, "report", ReportConfig).base == "base"


def test_bad_eval_values_name_the_key():
    with pytest.raises(ParamsError, match=r"eval.backend must be one of"):
        section({"eval": {"backend": "cloud"}}, "eval", EvalConfig)
    with pytest.raises(ParamsError, match=r"^params.yaml: eval: eval.attempts must be >= 1, got 0$"):
        section({"eval": {"attempts": 0}}, "eval", EvalConfig)
    with pytest.raises(ParamsError, match=r"^params.yaml: agent: unknown key\(s\) \['max_turn'\]"):
        section({"agent": {"max_turn": 3}}, "agent", AgentConfig)
    with pytest.raises(ParamsError, match=r"params.yaml: agent.context_strategy must be one of"):
        section({"agent": {"context_strategy": "forget"}}, "agent", AgentConfig)


def test_local_protocol_records_agent_settings_and_task_timeouts():
    agent_cfg = AgentConfig(temperature=0.3, max_output_tokens=256, max_turns=5, max_failed_replies=None)
    same = [SimpleNamespace(agent_timeout_sec=60.0, verifier_timeout_sec=30.0)] * 2
    mixed = same + [SimpleNamespace(agent_timeout_sec=120.0, verifier_timeout_sec=30.0)]
    protocol = local_protocol(agent_cfg, same, agent="termagent terminus", context_limit=8192)
    assert protocol == {"temperature": 0.3, "max_input_tokens": 8192, "max_output_tokens": 256, "max_turns": 5,
                        "max_failed_replies": None, "context_strategy": "summarize", "agent": "termagent terminus",
                        "timeouts": {"agent_sec": 60.0, "verifier_sec": 30.0, "source": "task.toml"}}
    protocol = local_protocol(AgentConfig(context_limit=1000), mixed, agent="a", context_limit=8192)
    assert protocol["max_input_tokens"] == 1000  # the configured limit wins over the policy's
    assert protocol["timeouts"]["agent_sec"] == {"min": 60.0, "max": 120.0}
    assert protocol["timeouts"]["verifier_sec"] == 30.0


def test_trajectory_takes_trial_error_over_episode_error():
    trial = {"task_id": "t", "attempt": 1, "reward": 0.0, "error": {"class": "AgentTimeoutError", "message": "m"},
             "agent_result": {"turns": [{"parse_ok": True}], "n_turns": 1, "tokens": {"in": 3, "out": 2},
                              "error": None, "model": "base"}}
    t = trajectory_from_trial(trial, model="x")
    assert t["error"]["class"] == "AgentTimeoutError" and t["model"] == "base" and t["n_turns"] == 1
    t = trajectory_from_trial({"task_id": "t", "attempt": 0, "reward": None, "error": None,
                               "agent_result": None}, model="x")
    assert t["turns"] == [] and t["tokens"] == {"in": 0, "out": 0} and t["model"] == "x"
