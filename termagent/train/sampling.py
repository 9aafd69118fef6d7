"""Measured solve rates: sample a policy on train tasks through the eval's own agent loop.

    rates = sample_policy("warmup", SampleParams(), agent=..., eval_cfg=..., sandbox=..., temperature=0.7,
                          tasks=train_tasks, image=..., out_dir=Path("data/sample/warmup"))

Every RL stage trains where its start policy *sometimes* succeeds: a task it always solves or never solves gives
a group of identical rewards, hence no advantage and no gradient. So before GRPO (and before MT-GRPO) the start
policy runs `attempts` multi-turn episodes on each sampled train task, at the RL stage's temperature, with the
same TerminusAgent, sandbox and verifier as the eval. Most minutes would go to tasks the policy never solves
(long episodes that end at the turn cap), so sampling is screened: `screen` episodes on every task first, the
remaining `attempts - screen` only on the tasks where one of those passed; then `expand` more tasks of each family
with a pass, screened the same way (a family the policy sometimes solves holds most of the tasks with signal).
A task's n says how many episodes it got. The output is a versioned artifact (out_dir):

    rates.json      {"model", "temperature", "attempts", "summary": {...},
                     "tasks": {task_id: {"n", "passes", "rate", "family", "mean_turns", "errors"}}}
    rollouts.jsonl  one line per episode: task_id, attempt, reward, passed, ended_by, n_turns, error,
                    conversation (the chat as the model last saw it, with its last reply)

Infrastructure failures (reward None, not a graded error) are not counted in n: they are not the policy's 0.
Only train tasks are ever sampled (the caller passes them; `sample_tasks` refuses any other split).
"""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from termagent import atomic

PASS = 1.0  # a trajectory passes when the verifier's reward reaches this (every test passes)


@dataclass(frozen=True)
class SampleParams:
    """The `sample:` section: how the start policy of an RL stage is measured on train tasks."""

    attempts: int = 4  # episodes per task: a rate in (0, 1) needs both outcomes among them
    screen: int = 2  # first this many episodes on every task; the rest only where one of them passed (0: no screen)
    expand: int = 6  # then up to this many more train tasks of each family with a pass, screened the same way
    max_tasks: int = 48  # train tasks sampled, dealt round-robin over families (0: every train task)
    concurrency: int = 8  # episodes at once; their model calls decode as one batch
    seed: int = 0  # the process's RNG seed (the calls are unseeded, so they batch) and the task deal

    def __post_init__(self) -> None:
        if self.attempts < 2:
            raise ValueError(f"sample.attempts must be >= 2 (a rate in (0, 1) needs two outcomes), got {self.attempts}")
        if not 0 <= self.screen <= self.attempts:
            raise ValueError(f"sample.screen must be in [0, sample.attempts={self.attempts}], got {self.screen}")
        if self.expand < 0:
            raise ValueError(f"sample.expand must be >= 0, got {self.expand}")
        if self.max_tasks < 0 or self.concurrency < 1:
            raise ValueError(f"sample.max_tasks must be >= 0 and sample.concurrency >= 1, got {self.max_tasks}, "
                             f"{self.concurrency}")


def sample_tasks(tasks: list, split_of: dict[str, str], params: SampleParams, only: set[str] | None = None) -> list:
    """The train tasks to sample: `only` (when given) restricts them; at most `max_tasks`, spread over families."""
    from termagent.evaluate.splits import select_held_out

    wrong = sorted(t.id for t in tasks if split_of.get(t.id) != "train")
    if wrong:
        raise ValueError(f"sampling reads train tasks only; got {len(wrong)} others, e.g. {wrong[:3]}")
    if only is not None:
        tasks = [t for t in tasks if t.id in only]
    return select_held_out(tasks, split_of, {"train": params.max_tasks}, seed=params.seed)


def unseen_tasks_of_solved_families(earlier: dict[str, dict], train: list, family_of, trained: dict[str, str],
                                    log=print) -> set[str]:
    """The train tasks of the families with a pass in `earlier` (a rates.json), less those in `trained` (task id ->
    the stage that trained on it): where the next RL stage can learn what no earlier stage showed it. Every family
    of `earlier` when none had a pass; every task of those families when all were trained on (said in `log`)."""
    families = {r.get("family") for r in earlier.values() if r["passes"] > 0}
    if not families:
        families = {r.get("family") for r in earlier.values()}
        log(f"sample: no task of the earlier sampling was solved; its {len(families)} families")
    in_reach = {t.id for t in train if family_of(t) in families}
    unseen = in_reach - set(trained)
    if not unseen:
        log(f"sample: earlier stages trained on all {len(in_reach)} tasks of the solved families; sampling them all")
        return in_reach
    log(f"sample: {len(unseen)} train tasks of {len(families)} solved families, {len(in_reach) - len(unseen)} left "
        "out (trained on by an earlier stage)")
    return unseen


def expansion_pool(train: list, only: set[str] | None, seed: int) -> list:
    """The train tasks `sample.expand` may add (restricted to `only` when given), in a seeded order."""
    pool = [t for t in train if only is None or t.id in only]
    random.Random(seed).shuffle(pool)
    return pool


def trajectory_record(t: dict) -> dict:
    """One rollouts.jsonl line of an episode (a trajectory of run_local_eval)."""
    from termagent.agent.episode import final_conversation

    reward = t.get("reward")
    error = t.get("error")
    return {"task_id": t["task_id"], "attempt": t["attempt"], "reward": reward,
            "passed": reward is not None and reward >= PASS, "ended_by": t.get("ended_by"),
            "n_turns": t.get("n_turns"), "error": error.get("class") if isinstance(error, dict) else error,
            "conversation": final_conversation(t)}


def solve_rates(records: list[dict], families: dict[str, str | None]) -> dict[str, dict[str, Any]]:
    """Per task: scored episodes n (infrastructure failures left out), passes, rate, family, mean turns."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_task[r["task_id"]].append(r)
    out = {}
    for task_id, rows in sorted(by_task.items()):
        scored = [r for r in rows if r["reward"] is not None]
        passes = sum(r["passed"] for r in scored)
        out[task_id] = {"n": len(scored), "passes": passes, "rate": passes / len(scored) if scored else None,
                        "family": families.get(task_id), "infra_failures": len(rows) - len(scored),
                        "mean_turns": round(statistics.fmean(r["n_turns"] or 0 for r in scored), 2) if scored else None,
                        "ended_by": dict(Counter(r["ended_by"] for r in rows))}
    return out


def mixed(rate: dict) -> bool:
    """The task's episodes hold a pass and a fail: a group sampled there is likely to carry signal."""
    return rate["n"] >= 2 and 0 < rate["passes"] < rate["n"]


HAND_WRITTEN = "(hand-written)"  # the family key of the tasks no generator made (their metadata names none)


def summary_of(rates: dict[str, dict]) -> dict[str, Any]:
    scored = [r for r in rates.values() if r["n"]]
    n_ep = sum(r["n"] for r in scored)
    by_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in scored:
        family = r["family"] or HAND_WRITTEN
        by_family[family][0] += r["passes"]
        by_family[family][1] += r["n"]
    return {"tasks": len(rates), "episodes": n_ep, "passes": sum(r["passes"] for r in scored),
            "pass_rate": round(sum(r["passes"] for r in scored) / n_ep, 4) if n_ep else 0.0,
            "tasks_mixed": sum(mixed(r) for r in scored), "tasks_all_pass": sum(r["passes"] == r["n"] for r in scored),
            "tasks_all_fail": sum(r["passes"] == 0 for r in scored),
            "infra_failures": sum(r["infra_failures"] for r in rates.values()),
            "pass_rate_by_family": {f: round(p / n, 3) for f, (p, n) in sorted(by_family.items())}}


def screened_episodes(tasks: list, params: SampleParams, run, log=print, pool: list = (),
                      family_of=lambda t: None) -> tuple[list[dict], float]:
    """`params.screen` episodes of every task, then `attempts - screen` more of those with a pass among them; then
    the same for up to `params.expand` tasks of `pool` (other train tasks) from each family that had a pass.

    run(tasks, attempts) -> (trajectories numbered attempt 0..attempts-1, wall seconds): run_local_eval's shape.
    The second round's attempts are numbered on from the screen's."""
    first = params.screen or params.attempts

    def screened(ts: list) -> tuple[list[dict], float, set[str]]:
        trajectories, wall_s = run(ts, first)
        passed = {t["task_id"] for t in trajectories if (t.get("reward") or 0) >= PASS}
        rest = [t for t in ts if t.id in passed]
        if first < params.attempts and rest:
            log(f"screen: {len(rest)} of {len(ts)} tasks passed; {params.attempts - first} attempts more each")
            more, more_s = run(rest, params.attempts - first)
            trajectories = trajectories + [{**t, "attempt": t["attempt"] + first} for t in more]
            wall_s += more_s
        return trajectories, wall_s, passed

    trajectories, wall_s, passed = screened(tasks)
    families = {family_of(t) for t in tasks if t.id in passed} - {None}
    seen = {t.id for t in tasks}
    added: Counter = Counter()
    extra = []
    for t in pool:  # pool order decides which tasks of a family are added
        fam = family_of(t)
        if fam in families and t.id not in seen and added[fam] < params.expand:
            added[fam] += 1
            extra.append(t)
    if extra:
        log(f"expand: {len(extra)} more tasks of the families with a pass ({', '.join(sorted(families))})")
        more, more_s, _ = screened(extra)
        trajectories, wall_s = trajectories + more, wall_s + more_s
    return trajectories, wall_s


def sample_policy(model: str, params: SampleParams, *, agent, eval_cfg, sandbox_params, temperature: float,
                  tasks: list, families: dict[str, str | None], image: str, out_dir: Path,
                  pool: list = (), log=print, engine=None) -> dict[str, Any]:
    """Run the episodes, write out_dir/rates.json and rollouts.jsonl; return rates.json's content."""
    from termagent.agent import TerminusAgent
    from termagent.evaluate.trajectories import run_local_eval
    from termagent.models.artifact import ModelArtifact
    from termagent.policy.openvino import EngineConfig
    from termagent.policy.shared import in_process_policy
    from termagent.sandbox import Sandbox

    if not tasks:
        raise ValueError("sample: no train task to sample")
    from termagent.train.common import seed_everything

    artifact = ModelArtifact.open(model)
    # The process's RNG is seeded, the calls are not: a seeded call never shares a batch (termagent.policy.batching
    # runs it alone, to be reproducible), which would serialise every episode's decoding. The draw then depends on
    # how the concurrent episodes' calls happen to batch, as in MT-GRPO's rollouts.
    seed_everything(params.seed)
    agent_cfg = dataclasses.replace(agent, temperature=temperature, seed=None)
    sandbox = Sandbox(sandbox_params.sandbox_config(image))
    policy = in_process_policy(artifact.base, artifact.adapter, policy=eval_cfg.policy, engine=engine or EngineConfig(),
                               concurrency=params.concurrency, batched=eval_cfg.batched,
                               prefix_cache=eval_cfg.prefix_cache)
    try:
        terminus = TerminusAgent(policy, agent_cfg)
        log(f"sample {model}: {len(tasks)} train tasks at temperature {temperature}, up to {params.attempts} "
            f"attempts each (screen {params.screen}, expand {params.expand})")
        trajectories, wall_s = screened_episodes(
            tasks, params, lambda ts, n: run_local_eval(sandbox, ts, terminus, attempts=n,
                                                        concurrency=params.concurrency, model=model,
                                                        description=f"sample {model}"), log=log,
            pool=pool, family_of=lambda t: families.get(t.id))
    finally:
        policy.close()
    records = [trajectory_record(t) for t in sorted(trajectories, key=lambda t: (t["task_id"], t["attempt"]))]
    rates = solve_rates(records, families)
    doc = {"model": model, "temperature": temperature, "attempts": params.attempts, "screen": params.screen,
           "seed": params.seed,
           "wall_s": round(wall_s, 1), "summary": summary_of(rates), "tasks": rates}
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out_dir / "rollouts.jsonl",
                      "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    atomic.write_json(out_dir / "rates.json", doc)
    return doc
