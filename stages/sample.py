"""DVC stages `sample_<model>`: measure a model's solve rate on train tasks, before an RL stage trains it.

    python stages/sample.py --model warmup --for grpo --out data/sample/warmup       # what `dvc repro sample_warmup` runs
    python stages/sample.py --model dpo --for mt_grpo --families-of data/sample/warmup/rates.json --out data/sample/dpo

Runs termagent.train.sampling.sample_policy: up to `sample.attempts` multi-turn episodes per train task (at most
`sample.max_tasks`, spread over families; screened, then `sample.expand` more tasks of each family with a pass)
through the eval's agent loop, at the temperature of the RL stage
named by --for (grpo.temperature or mt_grpo.temperature). --only restricts the tasks to those with at least
one pass in an earlier sampling (a cheaper second measurement; all of its tasks when none had a pass).
--families-of takes the train tasks of the families with a pass in an earlier sampling instead, less those the stages
of `curate.exclude_trained_by` trained on (their passes and pairs): MT-GRPO's candidates, within reach and unseen.
Writes --out/rates.json and rollouts.jsonl.
Reads params: sample, agent, eval.policy / eval.prefix_cache / eval.batched, engine, the RL stage's temperature (and for mt_grpo its
max_turns / max_turn_tokens: the episodes it will run), sandbox runner keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from termagent.agent.config import AgentConfig
from termagent.curate.select import CurateConfig, tasks_trained_by
from termagent.evaluate.config import EvalConfig
from termagent.params import profile_option, read_sections
from termagent.policy.openvino import EngineConfig
from termagent.rollouts import read_rates
from termagent.sandbox.settings import SandboxParams
from termagent.train.grpo import GRPOParams
from termagent.train.mt_grpo import MTGRPOParams
from termagent.train.sampling import (
    SampleParams,
    expansion_pool,
    sample_policy,
    sample_tasks,
    unseen_tasks_of_solved_families,
)

P = click.Path(path_type=Path)


@click.command()
@profile_option
@click.option("--model", required=True, help="A directory name under models/ (warmup, dpo, ...).")
@click.option("--for", "stage", type=click.Choice(["grpo", "mt_grpo"]), required=True,
              help="The RL stage this measurement feeds: its temperature is sampled.")
@click.option("--only", default=None, type=P, help="An earlier rates.json: sample only its tasks with a pass.")
@click.option("--families-of", "families_of", default=None, type=P,
              help="An earlier rates.json: sample the train tasks of its families with a pass, less those "
                   "curate.exclude_trained_by's stages trained on.")
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True, type=P)
@click.option("--image", default="data/image.json", show_default=True, type=P)
@click.option("--out", required=True, type=P, help="data/sample/<model>")
def main(params_file, profile, model, stage, only, families_of, tasks_index, image, out) -> None:
    from termagent.tasks.index import read_index, tasks_in_split
    from termagent.tasks.split import family_of

    if only and families_of:
        raise click.UsageError("--only and --families-of: give one")
    s = read_sections(params_file, profile, sample=SampleParams, curate=CurateConfig, agent=AgentConfig, eval=EvalConfig,
                      sandbox=SandboxParams, engine=EngineConfig, **{stage: GRPOParams if stage == "grpo" else MTGRPOParams})
    rl = getattr(s, stage)
    temperature = rl.temperature
    # the episodes MT-GRPO will run: its turn cap, per-turn cap and context handling (GRPO's first turn is the
    # eval agent's)
    agent = rl.agent_config(s.agent) if stage == "mt_grpo" else s.agent
    split_of = {r["id"]: r["split"] for r in read_index(tasks_index)["tasks"]}
    train = tasks_in_split(tasks_index, "train")
    try:
        keep = None
        if only:
            earlier = read_rates(only)
            keep = {t for t, r in earlier.items() if r["passes"] > 0}
            if not keep:  # nothing was solved before: measure every task the earlier sampling measured
                click.echo(f"sample: no task of {only} was solved; sampling all {len(earlier)} of its tasks")
                keep = set(earlier)
        if families_of:
            keep = unseen_tasks_of_solved_families(read_rates(families_of), train, family_of, tasks_trained_by(
                s.curate.exclude_trained_by, ignore=s.curate.exclude_ignores), log=click.echo)
        tasks = sample_tasks(train, split_of, s.sample, only=keep)
        doc = sample_policy(model, s.sample, agent=agent, eval_cfg=s.eval, sandbox_params=s.sandbox,
                            temperature=temperature, tasks=tasks, families={t.id: family_of(t) for t in train},
                            image=json.loads(image.read_text())["image"], out_dir=out,
                            pool=expansion_pool(train, keep, s.sample.seed), log=click.echo, engine=s.engine)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        raise click.ClickException(str(e)) from e
    m = doc["summary"]
    click.echo(f"{out}/rates.json: {m['tasks']} tasks x {doc['attempts']}, pass rate {m['pass_rate']:.3f}; tasks "
               f"mixed {m['tasks_mixed']}, all pass {m['tasks_all_pass']}, all fail {m['tasks_all_fail']}; "
               f"infra failures {m['infra_failures']}, wall {doc['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
