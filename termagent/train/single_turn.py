"""The single-turn GRPO environment: the agent's first-turn prompt, one reply executed in a fresh task
container, and its reward (docs/design.md#single-turn-reward).

    env = SingleTurnEnv(sandbox, tasks, EnvConfig(...), eos_token_ids=[...])
    env.probe_screens()                       # one container per task: the terminal the prompt shows
    rows = env.dataset_rows()                 # [{"prompt": [{"role": "user", ...}], "task_id": ...}]
    env.prepare(task_ids)                     # before generation: the batch's containers start now
    outcomes = env.score(task_ids, texts, completion_ids)   # after: run, verify, reward (memoised)

Train in the format you evaluate in: the prompt is the protocol's `initial_messages(instruction, screen)`
(params agent.protocol: ours, or Harbor's terminus-2 read from the Harbor package) — the one user message
`TerminusAgent` sends on its first turn, with the screen a fresh container of the task really shows; the
reply is parsed by the same protocol's parser and its commands are typed into the same tmux
terminal (`TmuxTerminal`, the agent section's pane size and output limit). As in the eval loop, a reply
that fails to parse or was cut off at the token limit runs nothing; here that also means no container
and reward 0 (no partial credit for a container nobody touched).

An infrastructure failure (container, tmux, verifier) has no reward: `Outcome.reward is None`, and every
reward function returns None for it, so TRL leaves it out of its group's mean and std (RESEARCH §1.5).
An agent timeout or an out-of-memory kill is graded (the task's fault or the model's): verifier 0.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from termagent import atomic
from termagent.protocol.protocols import protocol_for
from termagent.rewards import RewardWeights, single_turn_reward
from termagent.sandbox import GRADED_ERRORS, Sandbox, run_trial
from termagent.tasks.model import Task
from termagent.terminal import TerminalConfig, TmuxTerminal
from termagent.truncate import limit_output

log = logging.getLogger(__name__)

AGENT_NAME = "grpo"  # container label and trial key of every rollout
PROBE_NAME = "grpo-probe"


@dataclass(frozen=True)
class EnvConfig:
    weights: RewardWeights = field(default_factory=RewardWeights)
    concurrency: int = 8  # completions executed (containers in use) at once
    strict_format: bool = True  # only JSON that parsed without auto-fixes runs and earns the format reward
    pane_width: int = 160  # the agent section's tmux pane: the screen the prompt shows
    pane_height: int = 40
    max_observation_bytes: int = 10000
    deadline_margin_sec: float = 2.0  # stop typing this long before the task's agent timeout
    protocol: str = "termagent"  # the agent section's protocol: prompt text, reply parser, terminal capture
    harbor_package: str | None = None
    harbor_version: str | None = "0.25.0"

    @classmethod
    def from_agent(cls, agent) -> EnvConfig:
        """The eval agent's terminal and protocol (params `agent`), as GRPO's environment sees them."""
        return cls(pane_width=agent.pane_width, pane_height=agent.pane_height,
                   max_observation_bytes=agent.max_observation_bytes, deadline_margin_sec=agent.deadline_margin_sec,
                   protocol=agent.protocol, harbor_package=agent.harbor_package, harbor_version=agent.harbor_version)


@dataclass
class Outcome:
    """What one completion did and earned. `reward is None`: an infrastructure failure (not scored)."""

    task_id: str
    completion: str
    parse_ok: bool  # it runs: parsed (strict: without auto-fixes) and not cut off
    format_ok: bool  # valid Terminus JSON with at least one command
    truncated: bool  # no EOS: cut off at max_completion_length
    executed: bool
    exec_rc: int | None  # exit status of the last command that finished (None: none did / not run)
    script_ok: bool
    verifier_reward: float | None
    reward: float | None
    passed: int | None = None
    total: int | None = None
    error: dict | None = None  # {"class", "message"}: the trial's error, graded or not
    screen_drift: bool = False  # the container showed another screen than the prompt did
    durations: dict = field(default_factory=dict)  # seconds: create, agent, verify, tests, remove, total

    @property
    def infra_failure(self) -> bool:
        return self.reward is None

    def components(self) -> tuple[float, float, float] | None:
        """(format, script, verifier) in [0, 1]; None for an infrastructure failure."""
        if self.reward is None:
            return None
        return float(self.format_ok), float(self.script_ok), float(self.verifier_reward or 0.0)


def verifier_score(reward: float | None, passed: int | None, total: int | None, *,
                   partial_credit: bool = True) -> float:
    """1.0 when the tests pass (the verifier's reward reaches 1); else 0, or with `partial_credit` pytest
    passed/total (0 without a pytest summary), clamped to [0, 1]."""
    if reward is not None and reward >= 1.0:
        return 1.0
    if not partial_credit:
        return 0.0
    if total:
        return max(0.0, min(1.0, (passed or 0) / total))
    return max(0.0, min(1.0, reward or 0.0))


class ReplyAgent:
    """Implements the sandbox's Agent protocol for one already generated reply: start the terminal, type
    the reply's commands, capture what they printed (the eval loop's first turn, minus the model call)."""

    def __init__(self, commands, terminal: TerminalConfig, margin_sec: float):
        self.name = AGENT_NAME
        self.commands = commands
        self.terminal = terminal
        self.margin_sec = margin_sec

    def run(self, trial, task) -> dict:
        terminal = TmuxTerminal(trial, self.terminal)
        screen = terminal.start()
        deadline = getattr(trial, "deadline", None)
        stop_at = None if deadline is None else deadline - self.margin_sec
        t0 = time.monotonic()
        try:
            output = terminal.run(self.commands, deadline=stop_at)
        finally:
            terminal.close()
        # (the "harbor" capture returns the raw text, unbounded: the record keeps head and tail)
        text = output.text if self.terminal.capture == "termagent" else limit_output(
            output.text, self.terminal.max_output_bytes)
        return {"screen": screen, "rc": output.rc, "output": text, "exec_s": time.monotonic() - t0}


class SingleTurnEnv:
    def __init__(self, sandbox: Sandbox, tasks: Sequence[Task], config: EnvConfig = EnvConfig(),
                 eos_token_ids: Sequence[int] = (), verdict=None):
        self.sandbox = sandbox
        # a synthetic verdict (termagent.rewards.synthetic) replaces the task's tests: replies are judged on their
        # completion tokens and never executed (reward-following tests, scripts/bench_learns.py)
        self.verdict = verdict
        self.tasks = {task.id: task for task in tasks}
        if len(self.tasks) != len(tasks):
            raise ValueError("SingleTurnEnv: duplicate task ids")
        self.config = config
        self.protocol = protocol_for(config)  # the eval loop's first prompt and parser (agent.protocol)
        self.eos_token_ids = set(eos_token_ids)
        self.screens: dict[str, str] = {}
        self._attempt = 0  # trial keys stay unique over the whole run
        self._pending: list[tuple[Task, str, int]] = []  # announced (task, agent, attempt) of the batch
        self._memo_key: tuple | None = None
        self.last_outcomes: list[Outcome] = []
        self.last_score_s = 0.0
        self._lock = threading.Lock()

    # ---- prompts --------------------------------------------------------------------------------------

    def terminal_config(self) -> TerminalConfig:
        c = self.config
        return TerminalConfig(width=c.pane_width, height=c.pane_height, max_output_bytes=c.max_observation_bytes,
                              capture=self.protocol.capture)

    def probe_screens(self, cache: str | Path | None = None, progress: bool = True) -> dict[str, str]:
        """The screen a fresh container of each task shows once tmux is up (what the eval loop puts in its
        first prompt). Cached in `cache` by task id and content hash; missing entries are probed."""
        from termagent.sandbox.progress import TrialProgress

        cached = {}
        if cache is not None and Path(cache).is_file():
            cached = json.loads(Path(cache).read_text())
        todo = []
        for task in self.tasks.values():
            entry = cached.get(task.id)
            if entry and entry.get("hash") == task.content_hash and entry.get("pane") == self._pane_key():
                self.screens[task.id] = entry["screen"]
            else:
                todo.append(task)

        def probe(task: Task) -> tuple[str, str]:
            # A flaky read of the pane (an empty `docker exec` output) is re-read by TmuxTerminal.capture itself;
            # any other failure here is infrastructure and stops the stage.
            with self.sandbox.trial(task, agent_name=PROBE_NAME) as trial:
                terminal = TmuxTerminal(trial, self.terminal_config())
                try:
                    return task.id, terminal.start()
                finally:
                    terminal.close()

        if todo:
            with (TrialProgress("terminal screens", len(todo), enabled=progress, outcomes=False) as report,
                  ThreadPoolExecutor(self.config.concurrency) as pool):
                for task_id, screen in pool.map(probe, todo):
                    self.screens[task_id] = screen
                    report.advance()
        if cache is not None:
            atomic.write_json(cache, {tid: {"hash": self.tasks[tid].content_hash, "pane": self._pane_key(),
                                            "screen": s} for tid, s in sorted(self.screens.items())})
        return self.screens

    def _pane_key(self) -> str:
        # The screen depends on how it is captured (raw rows for Harbor's protocol, trimmed for ours).
        capture = "" if self.protocol.capture == "termagent" else f"/{self.protocol.capture}"
        return f"{self.config.pane_width}x{self.config.pane_height}{capture}"

    def prompt(self, task_id: str) -> list[dict]:
        if task_id not in self.screens:
            raise KeyError(f"no terminal screen for task {task_id!r}: call probe_screens() first")
        return self.protocol.initial_messages(self.tasks[task_id].instruction, self.screens[task_id])

    def dataset_rows(self) -> list[dict]:
        return [{"prompt": self.prompt(tid), "task_id": tid} for tid in sorted(self.tasks)]

    # ---- one batch ------------------------------------------------------------------------------------

    def prepare(self, task_ids: Sequence[str]) -> None:
        """Announce the batch before generating: its containers are created and started in the background
        (the Sandbox's warm pool) while the model generates. Forgets a previous batch's leftovers."""
        with self._lock:
            self._release_pending()
            self._memo_key = None
            specs = []
            for task_id in task_ids:
                specs.append((self.tasks[task_id], AGENT_NAME, self._attempt))
                self._attempt += 1
            self._pending = specs
        self.sandbox.expect(specs)

    def _release_pending(self) -> None:
        if self._pending:
            self.sandbox.forget(self._pending)
            self._pending = []

    def score(self, task_ids: Sequence[str], completions: Sequence[str],
              completion_ids: Sequence[Sequence[int]] | None = None) -> list[Outcome]:
        """Execute and score a batch (rows in order). The three reward functions call this with the same
        batch: the first call does the work, the others get the memoised outcomes."""
        key = (tuple(task_ids), tuple(completions))
        with self._lock:
            if key == self._memo_key:
                return self.last_outcomes
            specs = self._pending if [s[0].id for s in self._pending] == list(task_ids) else []
            if not specs:  # not announced (or another batch): fresh trial keys, no prestarted containers
                self._release_pending()
                specs = [(self.tasks[tid], AGENT_NAME, self._attempt + i) for i, tid in enumerate(task_ids)]
                self._attempt += len(task_ids)
            self._pending = []
        t0 = time.monotonic()
        rows = list(zip(specs, completions, completion_ids or [None] * len(completions), strict=True))
        parsed = [self._parse(text, ids) for (_, _, _), text, ids in rows]
        if self.verdict is not None:
            self.sandbox.forget(specs)
            outcomes = self._judge(specs, completions, completion_ids, parsed)
        else:
            outcomes = self._run(rows, specs, parsed)
        with self._lock:
            self._memo_key = key
            self.last_outcomes = outcomes  # type: ignore[assignment]
            self.last_score_s = time.monotonic() - t0
        return self.last_outcomes

    def _judge(self, specs, completions, completion_ids, parsed) -> list[Outcome]:
        """The synthetic verdict's outcomes: the verifier's place taken by the verdict on each reply's tokens (the
        reward is the verdict: train_grpo weighs the verifier alone when a verdict is given)."""
        if completion_ids is None:
            raise ValueError("a synthetic verdict judges completion tokens: the trainer passed no completion_ids")
        verdicts = self.verdict([len(ids) for ids in completion_ids], keys=[task.id for task, _, _ in specs])
        return [Outcome(task.id, text, parse_ok=p[0], format_ok=p[1], truncated=p[2], executed=False, exec_rc=None,
                        script_ok=False, verifier_reward=v, reward=v)
                for (task, _, _), text, p, v in zip(specs, completions, parsed, verdicts, strict=True)]

    def _run(self, rows, specs, parsed) -> list[Outcome]:
        """Replies typed into their task's container and verified by its tests."""
        # Replies that run nothing need no container: withdraw theirs now, before the others start.
        self.sandbox.forget([spec for spec, p in zip(specs, parsed) if not p[0]])
        outcomes: list[Outcome | None] = [None] * len(rows)
        with ThreadPoolExecutor(max(1, self.config.concurrency), thread_name_prefix="grpo-exec") as pool:
            futures = {}
            for i, ((task, _, attempt), text, _) in enumerate(rows):
                parse_ok, format_ok, truncated, response = parsed[i]
                if not parse_ok:
                    outcomes[i] = Outcome(task.id, text, parse_ok=False, format_ok=False, truncated=truncated,
                                          executed=False, exec_rc=None, script_ok=False, verifier_reward=0.0,
                                          reward=single_turn_reward(False, False, 0.0, self.config.weights))
                else:
                    futures[pool.submit(self._execute, task, attempt, text, format_ok, response)] = i
            for future, i in futures.items():
                outcomes[i] = future.result()
        return outcomes  # type: ignore[return-value]

    def _parse(self, text: str, ids: Sequence[int] | None):
        truncated = bool(ids) and self.eos_token_ids and ids[-1] not in self.eos_token_ids
        truncated = bool(truncated) or (ids is not None and len(ids) == 0)
        result = self.protocol.parse(text)
        # Strict: JSON the parser had to repair (closed brackets, cut out of prose) is invalid JSON and runs
        # nothing, so a broken reply can never collect credit from tests an untouched container passes.
        parse_ok = result.ok and not truncated and not (self.config.strict_format and result.fixes)
        format_ok = parse_ok and bool(result.response.commands)
        return parse_ok, format_ok, truncated, result.response if parse_ok else None

    def _execute(self, task: Task, attempt: int, text: str, format_ok: bool, response) -> Outcome:
        agent = ReplyAgent(response.commands, self.terminal_config(), self.config.deadline_margin_sec)
        result = run_trial(self.sandbox, task, agent, attempt=attempt)
        record = result.agent_result or {}
        durations = {k: round(v, 4) for k, v in result.timings.items() if isinstance(v, (int, float))}
        if "exec_s" in record:
            durations["exec"] = round(record["exec_s"], 4)
        graded = result.error is not None and result.error["class"] in {e.__name__ for e in GRADED_ERRORS}
        outcome = Outcome(task.id, text, parse_ok=True, format_ok=format_ok, truncated=False, executed=True,
                          exec_rc=record.get("rc"), script_ok=record.get("rc") == 0, verifier_reward=None,
                          reward=None, passed=result.passed, total=result.total, error=result.error,
                          screen_drift="screen" in record and record["screen"] != self.screens.get(task.id),
                          durations=durations)
        if result.reward is None and not graded:
            log.warning("rollout of %s not scored (infrastructure): %s", task.id, result.error)
            return outcome
        if graded:  # agent timeout / OOM: the commands' fault, graded like Harbor does
            outcome.script_ok = False
            outcome.verifier_reward = 0.0
        else:
            outcome.verifier_reward = verifier_score(result.reward, result.passed, result.total,
                                                     partial_credit=self.config.weights.partial_credit)
        outcome.reward = single_turn_reward(outcome.format_ok, outcome.script_ok, outcome.verifier_reward,
                                            self.config.weights)
        return outcome

    def close(self) -> None:
        with self._lock:
            self._release_pending()

    # ---- the three reward functions TRL calls ---------------------------------------------------------

    def reward_functions(self) -> list:
        """format, script, verifier: each in [0, 1], None for an infrastructure failure; TRL weighs them
        with `reward_weights` = (format, script, verifier) weights, which sums to `single_turn_reward`."""

        def make(index: int, name: str):
            def reward(prompts, completions, completion_ids=None, task_id=None, **_):
                texts = [_text(c) for c in completions]
                outcomes = self.score(task_id, texts, completion_ids)
                return [None if o.components() is None else o.components()[index] for o in outcomes]

            reward.__name__ = name
            return reward

        return [make(0, "format"), make(1, "script"), make(2, "verifier")]

    def reward_weights(self) -> list[float]:
        w = self.config.weights
        return [w.format, w.script, w.verifier]


def _text(completion) -> str:
    """A completion as TRL hands it over: text, or [{"role": "assistant", "content": text}]."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion)


# ---- group statistics (rollouts.jsonl / steps.jsonl) -------------------------------------------------------

def group_stats(rewards: Sequence[float | None], group_size: int) -> tuple[list[float], float]:
    """Per row: the std of its group's scored rewards (sample std, as TRL's nanstd; 0 with < 2 scored);
    and the share of groups whose scored rewards all tie (no learning signal; a group with < 2 scored
    rewards ties)."""
    if group_size < 1 or len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    stds, ties = [], 0
    groups = [rewards[i:i + group_size] for i in range(0, len(rewards), group_size)]
    for group in groups:
        scored = [r for r in group if r is not None and not math.isnan(r)]
        std = statistics.stdev(scored) if len(scored) >= 2 else 0.0
        ties += std <= 1e-12
        stds += [std] * group_size
    return stds, ties / len(groups) if groups else 0.0


def rollout_records(outcomes: Sequence[Outcome], prompts: Sequence[list[dict]], *, training_step: int,
                    group_size: int, generate_s: float) -> tuple[list[dict], float]:
    """One rollouts.jsonl line per completion (docs/design.md#rollouts fields + what the run saw), and the step's
    zero-std share. Infrastructure failures are logged too (reward null, infra_failure true)."""
    rewards = [o.reward for o in outcomes]
    stds, frac_zero = group_stats(rewards, group_size)
    records = []
    for o, prompt, std in zip(outcomes, prompts, stds, strict=True):
        comp = o.components() or (float(o.format_ok), 0.0, 0.0)
        records.append({
            "task_id": o.task_id, "training_step": training_step, "prompt": prompt, "completion": o.completion,
            "format_reward": comp[0], "script_reward": comp[1], "verifier_reward": comp[2],
            "reward": o.reward, "step_reward_std": std, "step_frac_zero_std": frac_zero,
            "exec_rc": o.exec_rc, "durations": {"generate_batch": round(generate_s, 4), **o.durations},
            "parse_ok": o.parse_ok, "truncated": o.truncated, "executed": o.executed,
            "passed": o.passed, "total": o.total, "infra_failure": o.infra_failure, "error": o.error,
            "screen_drift": o.screen_drift,
        })
    return records, frac_zero


def signal_groups_frac(outcomes: Sequence[Outcome], group_size: int) -> float:
    """The share of groups with a verified pass and a scored fail (infrastructure failures left out)."""
    groups = [outcomes[i:i + group_size] for i in range(0, len(outcomes), group_size)]
    if not groups:
        return 0.0
    signal = 0
    for g in groups:
        scored = [(o.verifier_reward or 0.0) >= 1.0 for o in g if o.reward is not None]
        signal += 0 < sum(scored) < len(scored)
    return round(signal / len(groups), 4)


def step_record(outcomes: Sequence[Outcome], *, training_step: int, frac_zero_std: float,
                timings: dict[str, float], group_size: int = 1) -> dict:
    scored = [o for o in outcomes if o.reward is not None]
    rewards = [o.reward for o in scored]
    n = len(outcomes)
    return {
        "training_step": training_step,
        "n_completions": n,
        "n_scored": len(scored),
        "n_infra_failures": n - len(scored),
        "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
        "reward_std": statistics.stdev(rewards) if len(rewards) >= 2 else 0.0,
        "frac_zero_std": frac_zero_std,
        # groups (consecutive rows of one task) holding a verified pass and a fail: the signal about solving
        "signal_groups_frac": signal_groups_frac(outcomes, group_size),
        "format_valid_rate": sum(o.format_ok for o in outcomes) / n if n else 0.0,
        "parse_ok_rate": sum(o.parse_ok for o in outcomes) / n if n else 0.0,
        "script_ok_rate": sum(o.script_ok for o in outcomes) / n if n else 0.0,
        "verifier_pass_rate": (sum((o.verifier_reward or 0.0) >= 1.0 for o in scored) / len(scored)
                               if scored else 0.0),
        "verifier_mean": statistics.fmean(o.verifier_reward or 0.0 for o in scored) if scored else 0.0,
        "screen_drift": sum(o.screen_drift for o in outcomes),
        "wall_s": round(timings.get("step", 0.0), 4),
        "timings": {k: round(v, 4) for k, v in timings.items()},
    }
