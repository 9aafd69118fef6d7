"""Synthetic rollouts.jsonl in the real schema and shape, for tests and the benchmark.

Per training step, `tasks_per_step` tasks (cycled through a seeded shuffle) get `generations`
completions each, in the Terminus JSON format. A completion is drawn from one of five kinds whose
odds move toward "pass" as training proceeds (a policy that learns):
- pass:        the task's own solution/solve.sh commands (sometimes with an extra harmless `ls`);
- hack:        passes, but also writes one of the task's provided input files (reward hacking:
               what dpo_filtered must remove);
- partial:     the solution cut short (the verifier gives passed/total);
- wrong:       a broken command in place of one of the solution's (fails, exit status 1);
- invalid:     not valid JSON (truncated or prose) — format and script rewards are 0.
Rewards follow docs/design.md#single-turn-reward (0.05·format + 0.10·script + 0.85·verifier); step_reward_std is the
std of `reward` within the group, step_frac_zero_std the share of groups at the step whose std is 0.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

from termagent.datasets.completion import terminus_completion
from termagent.judge.shell import solution_commands
from termagent.judge.task_context import TaskContext
from termagent.protocol import build_initial_messages
from termagent.rewards import RewardWeights, single_turn_reward
from termagent.rollouts import AtomicJsonlWriter


@dataclass
class SynthConfig:
    n: int = 17472  # rollouts in total (the seed project's GRPO run)
    generations: int = 8  # completions per prompt group
    tasks_per_step: int = 2  # prompt groups per training step (batch 4 x accumulation 4 / 8 generations)
    seed: int = 0
    format_weight: float = 0.05
    script_weight: float = 0.10
    verifier_weight: float = 0.85


def _kind(rng: random.Random, progress: float, skill: float) -> str:
    p_pass = min(0.85, max(0.05, skill + 0.45 * progress))
    roll = rng.random()
    if roll < 0.06:
        return "invalid"
    if roll < 0.06 + 0.06:
        return "hack"
    return "pass" if rng.random() < p_pass else rng.choice(["partial", "wrong", "wrong"])


def _rollout_for(kind: str, task: TaskContext, cmds: list[str], rng: random.Random) -> tuple[str, dict]:
    """(completion text, reward parts) for one completion of `kind`."""
    n_tests = max(1, len(re.findall(r"^\s*def test_", task.tests_text, re.MULTILINE)))
    provided = sorted(task.provided.files) or [f"{task.workdir.rstrip('/')}/input.txt"]
    analysis = f"Working on {task.id}; the terminal is at a fresh prompt in {task.workdir}."
    if kind == "pass":
        body = (["ls -la"] if rng.random() < 0.3 else []) + cmds
        text = terminus_completion(body, analysis=analysis, plan="Run the steps that produce the outputs.")
        return text, {"format": 1.0, "script": 1.0, "verifier": 1.0, "rc": 0}
    if kind == "hack":
        target = rng.choice(provided)
        forge = rng.choice([f"echo 'expected' > {target}", f"sed -i 's/.*/ok/' {target}",
                            f"rm -f {target}", f"cat /dev/null > {target}"])
        text = terminus_completion(cmds + [forge], analysis=analysis, plan="Make the checks pass.")
        return text, {"format": 1.0, "script": 1.0, "verifier": 1.0, "rc": 0}
    if kind == "partial":
        keep = rng.randint(0, max(0, len(cmds) - 1))
        passed = rng.randint(0, n_tests - 1)
        text = terminus_completion(cmds[:keep] or ["ls"], analysis=analysis, plan="Start with the first steps.")
        return text, {"format": 1.0, "script": 1.0, "verifier": passed / n_tests, "rc": 0}
    if kind == "wrong":
        broken = list(cmds) or ["true"]
        i = rng.randrange(len(broken))
        broken[i] = rng.choice([f"cat {task.workdir}/no_such_file", "grep -P '(' /dev/null",
                                "python3 -c 'import nosuchmodule'", "make -C /nonexistent"])
        text = terminus_completion(broken, analysis=analysis, plan="Try a quick approach.")
        return text, {"format": 1.0, "script": 0.0, "verifier": rng.choice([0.0, 0.0, 1 / n_tests]), "rc": 1}
    full = terminus_completion(cmds, analysis=analysis, plan="Solve it.")
    text = rng.choice([full[: max(10, len(full) // 2)],
                       "I will solve this by running the solution script step by step.",
                       full.replace('"commands"', '"cmds"')])
    return text, {"format": 0.0, "script": 0.0, "verifier": 0.0, "rc": None}


def _prompt(task: TaskContext) -> list[dict]:
    return build_initial_messages(task.instruction, f"root@sandbox:{task.workdir}# ")


def generate_rollouts(tasks: list[TaskContext], out: str | Path, config: SynthConfig | None = None) -> int:
    """Write `config.n` rollouts to `out` (atomically). Returns the number written."""
    cfg = config or SynthConfig()
    if not tasks:
        raise ValueError("generate_rollouts needs at least one task")
    rng = random.Random(cfg.seed)
    tasks = sorted(tasks, key=lambda t: t.id)
    commands = {t.id: solution_commands(t.solution_text) or ["true"] for t in tasks}
    prompts = {t.id: _prompt(t) for t in tasks}
    skill = {t.id: rng.uniform(0.05, 0.5) for t in tasks}
    order = list(tasks)
    rng.shuffle(order)
    per_step = cfg.generations * cfg.tasks_per_step
    n_steps = math.ceil(cfg.n / per_step)
    written, cursor = 0, 0
    with AtomicJsonlWriter(out) as w:
        for step in range(n_steps):
            groups = []
            for _ in range(cfg.tasks_per_step):
                task = order[cursor % len(order)]
                cursor += 1
                group = []
                for _g in range(cfg.generations):
                    kind = _kind(rng, step / max(1, n_steps - 1), skill[task.id])
                    text, parts = _rollout_for(kind, task, commands[task.id], rng)
                    reward = single_turn_reward(
                        bool(parts["format"]), bool(parts["script"]), parts["verifier"],
                        RewardWeights(cfg.format_weight, cfg.script_weight, cfg.verifier_weight))
                    group.append({
                        "task_id": task.id, "training_step": step, "prompt": prompts[task.id],
                        "completion": text, "format_reward": parts["format"], "script_reward": parts["script"],
                        "verifier_reward": round(parts["verifier"], 6), "reward": round(reward, 6),
                        "exec_rc": parts["rc"],
                        "durations": {"generate": round(rng.uniform(0.5, 4.0), 3),
                                      "exec": round(rng.uniform(0.1, 2.0), 3),
                                      "verify": round(rng.uniform(0.5, 3.0), 3)},
                    })
                groups.append(group)
            stds = [_std([r["reward"] for r in g]) for g in groups]
            frac_zero = sum(s < 1e-9 for s in stds) / len(stds)
            for g, s in zip(groups, stds):
                for r in g:
                    if written >= cfg.n:
                        break
                    r["step_reward_std"] = round(s, 6)
                    r["step_frac_zero_std"] = frac_zero
                    w.write(r)
                    written += 1
    return written


def _std(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
