"""Does RL follow its reward on the real model? T1/T2 for GRPO and MT-GRPO (issue 41): metrics/bench_learns.json.

    python scripts/bench_learns.py                         # make bench-learns: SmolLM2 + models/warmup, every test
    python scripts/bench_learns.py --warmup "" --tests t1-grpo --steps 3 --out /tmp/b.json   # base only, one test

T1 (synthetic): two runs per trainer from the same start and seed, on real first-turn prompts of train tasks
(one task per family, round-robin, `--t1-tasks`), rewarded by opposite verdicts (termagent.rewards.synthetic:
reply shorter / longer than a split point per task; MT-GRPO: tokens per model turn). GRPO takes each task's cut
from its first batch; MT-GRPO's arms first roll every task out with the start policy and take the cuts from that
(a task first drawn at step k would otherwise be cut on a policy already moved). Passes when, over the last 3
steps, arm "short" >= 0.75 and arm "long" <= 0.25.
T2 (real): one train task the start solves sometimes (or `--t2-task`), trained on with its own tests as the reward:
for GRPO the task whose measured rate (`--rates`, a sample stage's rates.json) is in (0.2, 0.6) nearest 0.4; for
MT-GRPO every such task rolled out `--t2-episodes` times with the start policy through its own path first, and the
one whose rate there is in (0.2, 0.6) nearest 0.4 (a rate of 4 attempts by another path is too loose: see
calibrate_mt_task). Each entry records its `task` and where it came from. Passes when the pass rate of the last 3
steps minus the first 3 is >= 0.3 (each step's draw: GRPO's dynamic-sampling replacements are not counted; task
retirement is off, as one task that ties twice would end the run).
Every run is the stage's own trainer (train_grpo, train_mt_grpo) under params.yaml's grpo / mt_grpo sections and
its generation path (the `engine` section: OpenVINO with the live adapter where `engine.rl`), with
max_steps = --steps; T1 turns dynamic sampling off (a replacement is chosen for its signal: it would bias the
arm's reward toward 0.5). Results are written after every run, so an interrupted bench keeps what it measured, and
a run of some --tests adds to an --out file of the same start (the adapter's weights, by digest), steps and
generation path, each trainer's section only where that trainer's configuration is the same (run the bench in parts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path

import click

from termagent import atomic
from termagent.agent.config import AgentConfig
from termagent.models.artifact import START_FILE, resolve_start, write_start
from termagent.params import profile_option, read_sections
from termagent.policy.openvino import EngineConfig
from termagent.rewards.synthetic import make_verdict
from termagent.rollouts import read_rates, tasks_with_signal
from termagent.sandbox import Sandbox
from termagent.sandbox.settings import SandboxParams
from termagent.tasks.index import tasks_in_split
from termagent.train.common import environment
from termagent.train.grpo import GRPOParams
from termagent.train.mt_grpo import MTGRPOParams
from termagent.train.reward_following import (
    calibrate_mt_task,
    calibrate_mt_verdict,
    improvement,
    pick_by_rate,
    run_grpo,
    run_mt_grpo,
    separation,
    with_cuts,
)
from termagent.train.single_turn import EnvConfig

TESTS = ("t1-grpo", "t2-grpo", "t1-mt", "t2-mt")


def start_dir(base: Path, warmup: str, work: Path) -> Path:
    """A directory with start.json, as train_grpo wants: the warmup stage's own, or one made for `--warmup ""`
    (the base) or a plain adapter directory (copied, then recorded as the start)."""
    if warmup and (Path(warmup) / START_FILE).is_file():
        return Path(warmup)
    out = work / "start"
    shutil.rmtree(out, ignore_errors=True)
    if warmup:
        shutil.copytree(warmup, out)
    write_start(out, base_dir=base, adapter=bool(warmup))
    return out


def adapter_digest(adapter: Path | None) -> str | None:
    """sha256 of the adapter's weights: what a start is (its path says nothing: every run's is models/warmup)."""
    return hashlib.sha256((adapter / "adapter_model.safetensors").read_bytes()).hexdigest() if adapter else None


def config_digest(config) -> str:
    """A trainer's configuration as the bench ran it (after --steps and --lr), for merging runs made in parts."""
    text = json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def merge(previous: dict, result: dict, out: Path, running: set[str]) -> None:
    """Carry `previous`'s measurements into `result` when both are the same start (the adapter's weights, not its
    path), steps and generation path. A trainer's section this run adds to (`running`: "grpo", "mt_grpo") must hold
    results of the same configuration; one it does not touch is kept with its own. Else stop (results would be
    lost): another --out, or --replace."""
    def identity(doc):
        start = doc.get("start") or {}
        return start.get("base"), start.get("adapter_sha256"), doc.get("steps"), doc.get("generation")

    held = [sect for sect in ("grpo", "mt_grpo") if previous.get(sect)]
    configs = previous.get("config") or {}
    differ = [sect for sect in held if sect in running and configs.get(sect) != result["config"][sect]]
    if identity(previous) != identity(result) or differ:
        raise click.ClickException(
            f"{out} holds results of another start, steps, generation path or {' and '.join(differ) or 'trainer'} "
            f"configuration: write to another --out, or pass --replace")
    for sect in held:
        result[sect] = previous[sect]
        result["config"][sect] = configs.get(sect)
    result["minutes"] = dict(previous.get("minutes") or {})


def one_per_family(tasks: list, n: int) -> list:
    """The first `n` train tasks dealt round-robin over families (by id), so T1's prompts span the suite."""
    by_family: dict[str, list] = {}
    for task in sorted(tasks, key=lambda t: t.id):
        by_family.setdefault(task.metadata.get("family") or task.id, []).append(task)
    dealt = []
    while len(dealt) < n and any(by_family.values()):
        for family in sorted(by_family):
            if by_family[family] and len(dealt) < n:
                dealt.append(by_family[family].pop(0))
    return dealt


def t2_candidates(tasks: dict, rates: Path | None, lo: float = 0.2, hi: float = 0.6) -> list[str]:
    """The train tasks whose --rates rate (a sample stage's rates.json) is strictly inside (lo, hi)."""
    if rates is None or not rates.is_file():
        raise click.ClickException(f"T2 needs --rates (a sample stage's rates.json; {rates} is missing) or --t2-task")
    inside = [t for t in tasks_with_signal(rates, min_rate=lo, max_rate=hi) if t in tasks]
    if not inside:
        raise click.ClickException(f"{rates}: no train task with a rate in ({lo}, {hi}); give --t2-task")
    return inside


def pick_t2_task(tasks: dict, rates: Path | None, task_id: str | None):
    """T2-GRPO's task and its --rates rate: --t2-task, or the candidate nearest 0.4 (T2-MT measures the candidates
    again on the start policy: calibrate_mt_task)."""
    if task_id:
        if task_id not in tasks:
            raise click.ClickException(f"--t2-task {task_id}: not a train task")
        return tasks[task_id], None
    measured = read_rates(rates)
    chosen = pick_by_rate({t: measured[t] for t in t2_candidates(tasks, rates)})
    return tasks[chosen], measured[chosen]["passes"] / measured[chosen]["n"]


@click.command()
@profile_option
@click.option("--base", default="models/base", show_default=True, type=click.Path(path_type=Path))
@click.option("--warmup", default="models/warmup", show_default=True,
              help='The start adapter: a warmup stage directory (start.json), a PEFT adapter directory, or "" for '
                   "the base with a fresh LoRA.")
@click.option("--tests", "tests_csv", default=",".join(TESTS), show_default=True)
@click.option("--steps", default=10, show_default=True, help="optimizer steps per run")
@click.option("--t1-tasks", default=14, show_default=True, help="train tasks whose first prompts T1 draws from")
@click.option("--rates", default="data/sample/warmup/rates.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--t2-task", default=None, help="T2's task (default: GRPO's picked from --rates, MT-GRPO's measured "
                                                "among --rates' candidates on the start policy)")
@click.option("--t2-episodes", default=8, show_default=True,
              help="T2-MT: episodes of each candidate task the start policy rolls out to choose the task")
@click.option("--lr", default=None, type=float, help="override grpo.trl / mt_grpo.trl learning_rate")
@click.option("--index", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--image", default="data/image.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--work", default="/tmp/bench_learns", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="metrics/bench_learns.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--replace", is_flag=True, help="start --out afresh (else a run adds to the results it holds)")
def main(params_file, profile, base, warmup, tests_csv, steps, t1_tasks, rates, t2_task, t2_episodes, lr, index, image,
         work, out, replace) -> None:
    tests = [t.strip() for t in tests_csv.split(",") if t.strip()]
    unknown = sorted(set(tests) - set(TESTS))
    if unknown:
        raise click.ClickException(f"--tests: unknown {unknown}; known: {', '.join(TESTS)}")
    s = read_sections(params_file, profile, grpo=GRPOParams, mt_grpo=MTGRPOParams, agent=AgentConfig,
                      sandbox=SandboxParams, engine=EngineConfig)
    engine = s.engine  # the stages' generation path (engine.rl: OpenVINO with the live adapter)
    work.mkdir(parents=True, exist_ok=True)
    start = start_dir(base, warmup, work)
    model_dir, adapter = resolve_start(start)
    trl_lr = {"learning_rate": lr} if lr is not None else {}
    grpo = dataclasses.replace(s.grpo, use_vllm=False, max_steps=steps, max_tasks=0,
                               trl={**s.grpo.trl, **trl_lr, "save_steps": steps})
    mt = dataclasses.replace(s.mt_grpo, use_vllm=False, max_steps=steps, trl={**s.mt_grpo.trl, **trl_lr})
    train = {t.id: t for t in tasks_in_split(index, "train")}
    t1 = one_per_family(list(train.values()), t1_tasks)
    t2, t2_rate = pick_t2_task(train, rates, t2_task) if "t2-grpo" in tests or t2_task else (None, None)
    # T2-MT's candidates, measured again on the start policy before its run (checked here, before any work)
    t2_pool = [train[t] for t in t2_candidates(train, rates)] if "t2-mt" in tests and not t2_task else None
    env = EnvConfig.from_agent(s.agent)
    sandbox_config = dataclasses.replace(s.sandbox.sandbox_config(json.loads(image.read_text())["image"]),
                                         warm_pool=max(s.sandbox.warm_pool, grpo.generation_batch_size),
                                         concurrency=max(s.sandbox.concurrency, mt.concurrency))
    # start_dir copies a plain adapter directory to work/start, a path gone with --work: record the directory given
    given = warmup if start == work / "start" else str(adapter)
    result = {"start": {"base": str(model_dir), "adapter": given if adapter else None,
                        "adapter_sha256": adapter_digest(adapter)}, "steps": steps,
              "config": {"grpo": config_digest(grpo), "mt_grpo": config_digest(mt)},
              "learning_rate": {"grpo": grpo.trl["learning_rate"], "mt_grpo": mt.trl["learning_rate"]},
              "t1_tasks": [t.id for t in t1],
              "generation": {"engine": engine.rl, "adapter_mode": engine.adapter_mode, "precision": engine.precision}
              if engine.rl else {"engine": False},
              "grpo": {}, "mt_grpo": {}, "minutes": {}, "environment": environment()}
    previous = json.loads(out.read_text()) if out.is_file() and not replace else {}
    if previous:  # a bench run in parts (--tests) adds to the same file, never over another configuration's results
        merge(previous, result, out, {"mt_grpo" if t.endswith("-mt") else "grpo" for t in tests})

    def save():
        ran = [v["verdict"]["passed"] for sect in ("grpo", "mt_grpo") for v in result[sect].values()]
        result["passed"] = bool(ran) and all(ran)
        atomic.write_json(out, result)

    def timed(name, fn):
        t0 = time.monotonic()
        value = fn()
        result["minutes"][name] = round((time.monotonic() - t0) / 60, 1)
        return value

    with Sandbox(sandbox_config) as sandbox:
        if "t1-grpo" in tests:
            config = dataclasses.replace(grpo, max_resamples=0, retire_after_ties=0)  # every step: the arm's own draw
            arms = {arm: timed(f"t1-grpo-{arm}", lambda arm=arm: run_grpo(
                config, work / "t1-grpo" / arm, warmup=start, tasks=t1, sandbox=sandbox, env_config=env,
                verdict=make_verdict(arm), engine=engine)) for arm in ("short", "long")}
            result["grpo"]["t1"] = t1_entry(arms)
            save()
        if "t2-grpo" in tests:
            # one task: the stage's retirement would end the run once it ties twice (run 16's warmup: at step 3)
            config = dataclasses.replace(grpo, retire_after_ties=0)
            run = timed("t2-grpo", lambda: run_grpo(config, work / "t2-grpo", warmup=start, tasks=[t2],
                                                    sandbox=sandbox, env_config=env, engine=engine))
            picked = {"id": t2.id, "from": "--t2-task" if t2_task else str(rates), "rate": t2_rate}
            result["grpo"]["t2"] = {**t2_entry(run), "task": picked}
            save()
        agent = s.agent
        if "t1-mt" in tests:
            # every task's cut from the start policy, the same for both arms (calibrate_mt_verdict says why)
            cuts = make_verdict("short")
            calibration = timed("t1-mt-calibrate", lambda: calibrate_mt_verdict(
                mt, agent, sandbox, t1, cuts, model_dir=model_dir, start_adapter=adapter, engine=engine,
                work=work / "t1-mt" / "calibration"))
            arms = {arm: timed(f"t1-mt-{arm}", lambda arm=arm: run_mt_grpo(
                mt, agent, sandbox, t1, work / "t1-mt" / arm, model_dir=model_dir, start_adapter=adapter,
                verdict=with_cuts(make_verdict(arm), cuts), engine=engine)) for arm in ("short", "long")}
            result["mt_grpo"]["t1"] = t1_entry(arms, calibration)
            save()
        if "t2-mt" in tests:
            if t2_task:
                task, chosen = t2, {"id": t2.id, "from": "--t2-task"}
            else:  # the candidates measured again on the start policy, through MT-GRPO's own path
                cal = timed("t2-mt-calibrate", lambda: calibrate_mt_task(
                    mt, agent, sandbox, t2_pool, episodes=t2_episodes, model_dir=model_dir, start_adapter=adapter,
                    engine=engine, work=work / "t2-mt" / "calibration"))
                chosen = {"id": cal["task"],
                          "from": f"calibration batch of the start policy over {rates}'s tasks in (0.2, 0.6)",
                          **{k: cal[k] for k in ("rates", "episodes")}}
                if cal["task"] is None:
                    atomic.write_json(work / "t2-mt" / "calibration.json", chosen)
                    raise click.ClickException(f"T2-MT: no candidate's rate on the start policy is in (0.2, 0.6): "
                                               f"{cal['rates']}")
                task = train[cal["task"]]
            run = timed("t2-mt", lambda: run_mt_grpo(mt, agent, sandbox, [task], work / "t2-mt", model_dir=model_dir,
                                                     start_adapter=adapter, engine=engine))
            result["mt_grpo"]["t2"] = {**t2_entry(run), "task": chosen}
            save()
    save()
    for sect in ("grpo", "mt_grpo"):
        for name, entry in result[sect].items():
            click.echo(f"{sect} {name}: {'PASS' if entry['verdict']['passed'] else 'FAIL'} {entry['verdict']}")
    click.echo(f"{out}: passed={result['passed']} minutes={result['minutes']}")


def t1_entry(arms: dict, calibration: dict | None = None) -> dict:
    """One T1's arms and verdict. `cut`: where each task's split point came from: the task's first batch (GRPO), or a
    calibration batch of every task from the start policy, shared by both arms (MT-GRPO: calibrate_mt_verdict)."""
    return {"cut": {"from": "calibration batch of the start policy", **calibration} if calibration
            else {"from": "first batch of each task"},
            "arms": {arm: {**run["per_step"], "threshold": run["threshold"], "skipped_steps": run["skipped_steps"]}
                     for arm, run in arms.items()},
            "verdict": separation(arms["short"]["per_step"]["reward"], arms["long"]["per_step"]["reward"])}


def t2_entry(run: dict) -> dict:
    return {**run["per_step"], "skipped_steps": run["skipped_steps"], "verdict": improvement(run["per_step"]["pass_rate"])}


if __name__ == "__main__":
    main()
