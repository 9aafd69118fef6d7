"""Oracle demonstrations: each training task's solution played through the real agent loop, as the
conversation an ideal Terminus agent would have had.

The solution script (solution/solve.sh) is split into top-level shell commands (`bash -n` decides where a
command ends: heredocs, loops and continued lines stay whole; `set -e...`/`exit` lines are left out,
they would end an interactive shell). An `OraclePolicy` answers the real `TerminusAgent`: one turn per
command group (analysis written from the observation it was just shown, plan from the script's comment),
then `task_complete` and its confirmation. The episode runs in a real container through tmux, so the
observations are the real terminal output and the prompt/observation messages are exactly those the eval
loop sends. Each demo's final state is verified by the task's tests; failures are dropped and counted.

Output line: {"conversations": [{"role", "content"}...], "task_id", "reward", "n_turns", "source"}
(the OpenThoughts-Agent-v1-SFT / Terminus-2 trace shape, plus provenance).
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from termagent import atomic
from termagent.agent import AgentConfig, TerminusAgent
from termagent.agent.episode import final_conversation
from termagent.policy.base import Generation, Policy
from termagent.protocol import AgentResponse, Command, render_response

log = logging.getLogger(__name__)

_SKIP = re.compile(r"^\s*(set\s+-[euxo]+\b.*|set\s+-o\s+\w+.*|exit(\s+\d+)?\s*;?\s*)$")
_FAST = re.compile(r"^\s*(cd|ls|echo|cat|pwd|mkdir|cp|mv|rm|touch|chmod|chown|ln|head|tail|wc|true|export)\b")
_MAX_PLAN_CHARS = 80  # a script comment longer than this is not used as the plan
_SLOW = re.compile(r"\b(make|gcc|cc|g\+\+|pip|apt-get|cargo|go build|pytest|sleep|git bisect)\b")


@dataclass(frozen=True)
class DemosConfig:
    split: str = "train"  # tasks index split the demos are made from (training reads `train` only)
    concurrency: int = 6  # containers at once
    min_reward: float = 1.0  # a demo is kept only when its final state earns this verifier reward
    fast_duration: float = 0.1  # cd/ls/echo-like commands (the prompt's own advice)
    default_duration: float = 1.0  # other commands; the terminal returns early once a command finished
    slow_duration: float = 10.0  # builds, installs, test runs
    max_tasks: int = 0  # 0: every task of the split; N: the first N by id (smoke runs)

    def __post_init__(self):
        if not 0.0 <= self.min_reward <= 1.0:
            raise ValueError(f"min_reward must be within [0, 1], got {self.min_reward}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")


@dataclass
class Step:
    """One top-level shell command of a solution, with the comment lines just above it."""

    command: str
    comment: str = ""


class ScriptError(ValueError):
    pass


def _complete(text: str) -> bool:
    """True when `text` is a syntactically complete bash program (so no open quote/heredoc/loop)."""
    result = subprocess.run(["bash", "-n"], check=False, input=text, text=True, capture_output=True)
    # An unterminated heredoc is only a warning for bash -n ("here-document ... delimited by end-of-file").
    return result.returncode == 0 and "here-document" not in result.stderr


def split_script(script: str) -> list[Step]:
    """The top-level commands of a shell script, each with its preceding comment lines."""
    steps: list[Step] = []
    comment: list[str] = []
    buffer: list[str] = []
    for line in script.splitlines():
        if not buffer:
            stripped = line.strip()
            if not stripped or stripped.startswith("#!"):
                comment = [] if not stripped else comment
                continue
            if stripped.startswith("#"):
                comment.append(stripped.lstrip("#").strip())
                continue
            if _SKIP.match(line):
                continue
        buffer.append(line)
        text = "\n".join(buffer)
        if not text.rstrip().endswith("\\") and _complete(text + "\n"):
            steps.append(Step(command=text.strip("\n"), comment=" ".join(c for c in comment if c)))
            buffer, comment = [], []
    if buffer:
        raise ScriptError(f"the script ends inside an unfinished command: {buffer[0][:80]!r}")
    # `exit` inside a command (a polling loop's `exit 0`) would end the interactive shell, and the tmux
    # session with it: from the first such command on, the rest of the script runs in one subshell, which
    # keeps the script's meaning (the exit skips what follows).
    for index, step in enumerate(steps):
        if re.search(r"(^|[;&|({\s])exit\b", _without_heredocs(step.command)):
            tail = "\n".join(s.command for s in steps[index:])
            steps[index:] = [Step(command=f"(\n{tail}\n)", comment=step.comment)]
            break
    return steps


def _without_heredocs(command: str) -> str:
    """The command with heredoc bodies removed (their text is data, not shell)."""
    out, delimiter = [], None
    for line in command.splitlines():
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        out.append(line)
        match = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if match:
            delimiter = match.group(1)
    return "\n".join(out)


def group_steps(steps: list[Step], max_groups: int) -> list[list[Step]]:
    """One group (turn) per command, merging neighbours evenly when there are more than `max_groups`."""
    if max_groups < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    size = max(1, math.ceil(len(steps) / max_groups))
    return [steps[i:i + size] for i in range(0, len(steps), size)]


class OraclePolicy(Policy):
    """Answers the agent loop with the solution, turn by turn: a Policy like any model, so the episode,
    its messages and its observations are exactly the eval loop's."""

    name = "oracle"
    context_limit = None  # never reduces the context

    def __init__(self, groups: list[list[Step]], config: DemosConfig):
        self.groups = groups
        self.config = config

    def count_tokens(self, messages: list[dict]) -> int:
        return sum(len(str(m.get("content", ""))) for m in messages) // 4

    def duration(self, command: str) -> float:
        if _SLOW.search(command):
            return self.config.slow_duration
        if _FAST.match(command) and "\n" not in command.strip() and "|" not in command:
            return self.config.fast_duration
        return self.config.default_duration

    def reply(self, turn: int, observation: str) -> AgentResponse:
        # Short, templated analysis/plan: a demo teaches the reply's JSON skeleton and the keystrokes; free
        # text (the last output line, the script's long comments) is what a small model cannot predict and
        # would spend its capacity (and the SFT loss) on.
        n = len(self.groups)
        analysis = "Fresh shell, nothing done yet." if turn == 0 else "The previous commands ran."
        if turn < n:
            group = self.groups[turn]
            comments = [s.comment for s in group if s.comment and len(s.comment) <= _MAX_PLAN_CHARS]
            plan = comments[0].rstrip(".") + "." if len(comments) == 1 and len(group) == 1 else "Run the next step."
            commands = tuple(Command(keystrokes=s.command + "\n", duration=self.duration(s.command)) for s in group)
            return AgentResponse(analysis=analysis, plan=plan, commands=commands, task_complete=False)
        if turn == n:
            return AgentResponse(analysis="Every step of the task is done.", plan="Mark the task complete.",
                                 commands=(), task_complete=True)
        return AgentResponse(analysis="The task is done.", plan="Confirm that the task is complete.",
                             commands=(), task_complete=True)

    def generate(self, messages_batch, *, max_tokens, temperature, seed=None, top_p=1.0):
        out = []
        for messages in messages_batch:
            turn = sum(1 for m in messages if m["role"] == "assistant")
            text = render_response(self.reply(turn, messages[-1]["content"]))
            out.append(Generation(text=text, finish_reason="stop", prompt_tokens=self.count_tokens(messages),
                                  completion_tokens=len(text) // 4))
        return out


class DemoAgent:
    """The sandbox Agent for one demo: the real TerminusAgent driven by an OraclePolicy for `task`."""

    name = "oracle-demo"

    def __init__(self, config: DemosConfig, agent_config: AgentConfig):
        from termagent.protocol.protocols import protocol_for

        self.config = config
        self.agent_config = agent_config
        protocol_for(agent_config)  # a missing Harbor package (agent.protocol) stops here, not in every trial

    def groups_for(self, task) -> list[list[Step]]:
        script = task.solve_script
        if script is None or not Path(script).is_file():
            raise ScriptError(f"{task.id}: no solution script")
        steps = split_script(Path(script).read_text())
        if not steps:
            raise ScriptError(f"{task.id}: the solution script has no command")
        # Two more turns than groups: task_complete, then its confirmation.
        return group_steps(steps, max(1, self.agent_config.max_turns - 2))

    def run(self, trial, task) -> dict:
        policy = OraclePolicy(self.groups_for(task), self.config)
        # Sampling settings are irrelevant to the oracle; the loop settings (turns, pane, observation
        # size) are the eval's.
        return TerminusAgent(policy, self.agent_config).run(trial, task)


def demo_line(task, result) -> dict:
    record = result.agent_result or {}
    return {"conversations": final_conversation(record), "task_id": task.id, "reward": result.reward,
            "n_turns": record.get("n_turns"), "source": "oracle"}


def build_demos(tasks: list, sandbox, config: DemosConfig, agent_config: AgentConfig, out_path: str | Path,
                *, progress: bool = True) -> dict:
    """Run every task's oracle through the agent loop in a real container; keep the verified demos.
    Writes `out_path` (JSONL) atomically; returns the counts (written to metrics by the stage)."""
    from termagent.sandbox import run_trials

    tasks = sorted(tasks, key=lambda t: t.id)
    if config.max_tasks:
        tasks = tasks[: config.max_tasks]
    if not tasks:
        raise ValueError(f"no task in split {config.split!r}: nothing to demonstrate")
    agent = DemoAgent(config, agent_config)
    dropped: Counter = Counter()
    runnable = []
    for task in tasks:
        try:
            agent.groups_for(task)
            runnable.append(task)
        except ScriptError as error:
            log.warning("demo %s: %s", task.id, error)
            dropped["no_usable_solution"] += 1
    results = run_trials(sandbox, [(t, agent, 0) for t in runnable], concurrency=config.concurrency,
                         progress=progress, description="demos")
    lines, per_task = [], []
    for task, result in zip(runnable, results):
        record = result.agent_result or {}
        reason = None
        if result.error:
            reason = "infrastructure_error" if result.reward is None else "agent_error"
        elif record.get("ended_by") != "task_complete":
            reason = f"ended_by_{record.get('ended_by')}"
        elif result.reward is None or result.reward < config.min_reward:
            reason = "verifier_failed"
        per_task.append({"task_id": task.id, "reward": result.reward, "kept": reason is None, "reason": reason,
                         "n_turns": record.get("n_turns"),
                         "error": result.error, "wall_s": round(result.timings.get("total", 0.0), 2)})
        if reason:
            dropped[reason] += 1
            log.warning("demo %s dropped: %s (reward %s)", task.id, reason, result.reward)
        else:
            lines.append(demo_line(task, result))
    atomic.write_text(out_path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    turns = [line["n_turns"] for line in lines]
    return {"n_tasks": len(tasks), "n_demos": len(lines), "n_dropped": sum(dropped.values()),
            "dropped": dict(dropped), "mean_turns": round(sum(turns) / len(turns), 2) if turns else None,
            "tasks": per_task}
