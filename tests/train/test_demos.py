"""Oracle demonstrations: the solution script split into turns, and demos made and re-verified in real
containers through the real agent loop (a failing solution is dropped and counted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from termagent.agent import AgentConfig
from termagent.protocol import parse_response, render_system_prompt
from termagent.train.demos import DemosConfig, Step, build_demos, group_steps, split_script

FIXTURE = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "count-lines"

SCRIPT = """#!/bin/bash
set -euo pipefail
# Go to the app.
cd /app
cat > a.py <<'PY'
print("hi")
exit(0)
PY
awk '{ n++ }
     END { print n }' notes.txt \\
  | tee count.txt

for i in 1 2; do
  test -s count.txt && exit 0
done
echo never
exit 1
"""


def test_split_script_keeps_multiline_commands_whole_and_drops_shell_enders():
    steps = split_script(SCRIPT)
    assert steps[0] == Step(command="cd /app", comment="Go to the app.")
    assert steps[1].command.startswith("cat > a.py <<'PY'") and steps[1].command.endswith("PY")
    assert steps[2].command.startswith("awk") and steps[2].command.endswith("| tee count.txt")
    # the loop's `exit 0` would end the interactive shell: from there on the script runs in one subshell
    assert steps[3].command.startswith("(\nfor i in 1 2; do") and steps[3].command.endswith("echo never\n)")
    assert len(steps) == 4 and not any("pipefail" in s.command for s in steps)


def test_group_steps_merges_neighbours_to_fit_the_turn_budget():
    steps = [Step(command=f"echo {i}") for i in range(7)]
    assert [len(g) for g in group_steps(steps, 6)] == [2, 2, 2, 1]
    assert [len(g) for g in group_steps(steps, 10)] == [1] * 7


@pytest.mark.docker
def test_demos_are_real_episodes_verified_and_failures_dropped(base_image, docker_client, tmp_path):
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task

    broken = tmp_path / "count-lines-broken"
    shutil.copytree(FIXTURE, broken)
    (broken / "solution" / "solve.sh").write_text("#!/bin/bash\necho 0 > /app/count.txt\n")
    tasks = [load_task(FIXTURE), load_task(broken)]
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)
    out = tmp_path / "demos.jsonl"
    stats = build_demos(tasks, sandbox, DemosConfig(), AgentConfig(max_turns=8), out, progress=False)
    assert stats["n_demos"] == 1 and stats["dropped"] == {"verifier_failed": 1}
    [demo] = [json.loads(line) for line in out.read_text().splitlines()]
    assert demo["task_id"] == "count-lines" and demo["reward"] == 1.0
    conv = demo["conversations"]
    # the eval loop's shape: one user message first (no system message), then strict alternation
    assert [m["role"] for m in conv] == ["user", "assistant"] * (len(conv) // 2)
    assert conv[0]["content"].startswith(render_system_prompt())
    assert "Current terminal state:\n" in conv[0]["content"]
    replies = [parse_response(m["content"]) for m in conv if m["role"] == "assistant"]
    assert all(r.ok and not r.warnings for r in replies)
    assert replies[0].response.commands[0].keystrokes == "wc -l < /app/notes.txt > /app/count.txt\n"
    # the real terminal echoed the command; then task_complete and its confirmation
    assert "wc -l < /app/notes.txt" in conv[2]["content"]
    assert [r.response.task_complete for r in replies] == [False, True, True]
    assert "Are you sure you want to mark the task complete?" in conv[-2]["content"]


def test_oracle_replies_are_short_and_templated():
    """The demo texts a small model must learn: a fixed analysis per situation, the script's comment as the
    plan only when it is short and the turn runs one command, then task_complete and its confirmation."""
    from termagent.protocol import parse_response
    from termagent.train.demos import DemosConfig, OraclePolicy, Step

    groups = [[Step("cd /app", "go to the app")], [Step("ls", "x" * 200)], [Step("a", ""), Step("b", "bb")]]
    policy = OraclePolicy(groups, DemosConfig())
    replies = [policy.reply(turn, "root@sandbox:/app# ls\nfoo.txt\nroot@sandbox:/app#") for turn in range(5)]
    assert [r.analysis for r in replies[:3]] == ["Fresh shell, nothing done yet.", "The previous commands ran.",
                                                 "The previous commands ran."]
    assert [r.plan for r in replies[:3]] == ["go to the app.", "Run the next step.", "Run the next step."]
    assert all("foo.txt" not in r.analysis for r in replies)  # no copied terminal output
    assert [c.keystrokes for c in replies[2].commands] == ["a\n", "b\n"]
    assert [r.task_complete for r in replies] == [False, False, False, True, True]
    assert replies[3].commands == () and replies[4].commands == ()
    text = policy.generate([[{"role": "user", "content": "x"}]], max_tokens=512, temperature=0.0)[0].text
    assert parse_response(text).ok and len(text) < 250


def test_no_solution_types_a_tab():
    """A demo types each solution step into an interactive shell, where TAB is readline's completion key: a
    heredoc's TABs vanish and a Makefile written that way has no recipes (the two makefile tasks' demos failed
    their verifier in every run until their solutions used .RECIPEPREFIX)."""
    root = Path(__file__).resolve().parents[2] / "data" / "tasks"
    scripts = sorted(root.glob("*/solution/solve.sh"))
    assert len(scripts) > 20
    typed = {p.parent.parent.name: [s.command for s in split_script(p.read_text())] for p in scripts}
    assert [task for task, steps in typed.items() if any("\t" in c for c in steps)] == []


@pytest.mark.docker
def test_a_makefile_written_through_the_terminal_builds(base_image, docker_client, tmp_path):
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task

    task = load_task(Path(__file__).resolve().parents[2] / "data" / "tasks" / "makefile-greet-build")
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    stats = build_demos([task], sandbox, DemosConfig(), AgentConfig(max_turns=8), tmp_path / "d.jsonl",
                        progress=False)
    assert stats["n_demos"] == 1 and stats["dropped"] == {}
