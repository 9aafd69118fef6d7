"""End to end: the local eval on a real container — TerminusAgent with a replay policy, one task, two
attempts — writes trajectories, the viewer and metrics with every field of docs/design.md#schemas."""

import json
from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent
from termagent.evaluate.outputs import write_eval_outputs
from termagent.evaluate.trajectories import run_local_eval
from termagent.policy import make_policy
from termagent.policy.shared import SerializedPolicy
from termagent.tasks.load import load_task

TASK = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "count-lines"

SCRIPT = [
    "I will count the lines now.",  # no JSON at all: a hard parse error, nothing runs
    json.dumps({"analysis": "Count the lines.", "plan": "wc -l into count.txt",
                "commands": [{"keystrokes": "wc -l < /app/notes.txt > /app/count.txt\n", "duration": 0.5}],
                "task_complete": True}),
    json.dumps({"analysis": "Done.", "plan": "confirm", "commands": [], "task_complete": True}),
]


@pytest.mark.docker
def test_local_eval_on_a_real_container(tmp_path, base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig

    replay = tmp_path / "replay.jsonl"
    # one script per attempt: the replay policy hands completions out in order
    replay.write_text("".join(json.dumps(c) + "\n" for c in SCRIPT * 2))
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    agent = TerminusAgent(SerializedPolicy(make_policy(f"replay:{replay}")), AgentConfig(max_turns=6))

    trajectories, wall_s = run_local_eval(sandbox, [load_task(TASK)], agent, attempts=2, concurrency=1,
                                          model="replay", progress=False)
    assert [(t["task_id"], t["attempt"]) for t in trajectories] == [("count-lines", 0), ("count-lines", 1)]
    metrics = write_eval_outputs(trajectories, out_dir=tmp_path / "eval", metrics_path=tmp_path / "replay.json",
                                 model="replay", protocol={"agent": "terminus"}, wall_s=wall_s)

    assert metrics["accuracy"] == 1.0 and metrics["per_task"] == {"count-lines": 1.0}
    assert metrics["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert metrics["first_turn_valid_json"] == 0.0  # the first reply of each attempt had no JSON
    assert metrics["mean_turns"] == 3 and metrics["errors"] == {}
    assert metrics["wall_s"] > 0
    saved = json.loads((tmp_path / "replay.details.json").read_text())
    assert saved == json.loads(json.dumps(metrics))
    numbers = json.loads((tmp_path / "replay.json").read_text())  # the DVC metric: a few numbers
    assert numbers["accuracy"] == 1.0 and numbers["pass_at_k"] == {"2": 1.0} and numbers["n_tasks"] == {"all": 1}

    trajectory = json.loads((tmp_path / "eval" / "trajectories" / "count-lines__0.json").read_text())
    assert trajectory["reward"] == 1.0 and trajectory["turns"][0]["parse_ok"] is False
    assert trajectory["turns"][1]["rc"] == 0
    page = (tmp_path / "eval" / "trajectories" / "count-lines__1.html").read_text()
    assert "wc -l &lt; /app/notes.txt &gt; /app/count.txt" in page and ">1.0</b>" in page
    assert 'href="trajectories/count-lines__0.html"' in (tmp_path / "eval" / "index.html").read_text()


@pytest.mark.docker
def test_sampled_attempts_share_the_run_and_land_in_the_details(tmp_path, base_image, docker_client):
    """eval.sampled's attempts run in the eval's own pool of trials with their own agent (temperature, seed),
    numbered after the eval's; the numbers file has the sampled mean, the details each attempt's 0/1."""
    from termagent.evaluate.outputs import details_path
    from termagent.evaluate.trajectories import attempt_plan, run_trial_plan
    from termagent.sandbox import Sandbox, SandboxConfig

    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(c) + "\n" for c in SCRIPT * 3))
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    policy = SerializedPolicy(make_policy(f"replay:{replay}"))
    greedy = TerminusAgent(policy, AgentConfig(max_turns=6))
    sampler = TerminusAgent(policy, AgentConfig(max_turns=6, temperature=0.7, seed=0))
    task = load_task(TASK)
    trajectories, wall_s = run_trial_plan(sandbox, attempt_plan([task], greedy, range(1))
                                          + attempt_plan([task], sampler, range(1, 3)), concurrency=1, model="replay")
    for t in trajectories:
        t["mode"] = "sampled" if t["attempt"] >= 1 else "eval"
    assert sorted(t["attempt"] for t in trajectories) == [0, 1, 2]
    assert {t["attempt"]: t["config"]["temperature"] for t in trajectories} == {0: 0.0, 1: 0.7, 2: 0.7}
    details = write_eval_outputs(trajectories, out_dir=tmp_path / "eval", metrics_path=tmp_path / "m.json",
                                 model="replay", protocol={}, wall_s=wall_s, split_of={task.id: "eval_id"},
                                 families={task.id: "count"}, sampled={"attempts": 2, "temperature": 0.7, "seed": 0})
    assert details["n_attempts"] == 1 and details["primary"] == "eval_id"  # accuracy: the eval's own attempt
    assert details["outcomes"] == {task.id: {"split": "eval_id", "family": "count", "attempts": {"0": 1},
                                             "sampled": {"1": 1, "2": 1}}}
    numbers = json.loads((tmp_path / "m.json").read_text())
    assert numbers["sampled"] == {"accuracy": 1.0, "accuracy_stderr": 0.0, "pass_at_2": 1.0}
    assert json.loads(details_path(tmp_path / "m.json").read_text())["sampled"]["seed"] == 0
