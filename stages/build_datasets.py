"""DVC stage `datasets` (this file is not named datasets.py: a script directory on sys.path named so would
shadow the Hugging Face `datasets` package that TRL imports): the six training datasets from the GRPO rollouts,
in data/datasets.

    python stages/build_datasets.py                        # what `dvc repro datasets` runs
    python stages/build_datasets.py --rollouts /tmp/synthetic.jsonl --out /tmp/datasets

Reads params: datasets (all keys), judge (all keys), tasks.dirs.
Writes data/datasets/{sft,dpo,dpo_filtered,api_sft,prm_sequence,prm_step}.jsonl, the removed-pairs
sidecar dpo_filtered.removed.jsonl, and summary.json (counts, malformed lines, judge and version).
With --sampled (the sample stage's multi-turn trajectories of the start policy on train tasks) also
rft_sft.jsonl (verified passing trajectories) and dpo_turns.jsonl (a pass and a fail of one task, at the turn
where they part): termagent/datasets/trajectories.py.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent.datasets import BuildConfig, build_datasets
from termagent.judge import JudgeConfig, JudgeError, judge_from_config, load_task_contexts
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.command()
@profile_option
@click.option("--rollouts", default="data/rollouts/grpo/rollouts.jsonl", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--sampled", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The sample stage's rollouts.jsonl: passing trajectories and divergent-turn pairs.")
@click.option("--out", default="data/datasets", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, rollouts: Path, sampled: Path | None, out: Path) -> None:
    p = read_sections(params_file, profile, datasets=BuildConfig, judge=JudgeConfig, tasks=TasksConfig)
    try:
        summary = build_datasets(rollouts, out, judge_from_config(p.judge), load_task_contexts(p.tasks.dirs),
                                 p.datasets)
    except JudgeError as e:
        raise click.ClickException(str(e)) from e
    if sampled is not None:
        summary.counts.update(write_sampled(sampled, out, p.datasets))
    counts = " ".join(f"{k.removesuffix('.jsonl')}={v}" for k, v in summary.counts.items())
    click.echo(f"{out}: {counts} (judge {summary.judge}, {summary.input['n_malformed']} malformed lines, "
               f"{summary.wall_s:.1f} s)")


def write_sampled(sampled: Path, out: Path, cfg: BuildConfig) -> dict[str, int]:
    """rft_sft.jsonl and dpo_turns.jsonl from the sampled trajectories; their counts merged into summary.json."""
    import json

    from termagent import atomic
    from termagent.datasets.trajectories import rft_rows, turn_pairs
    from termagent.rollouts import iter_jsonl

    records = list(iter_jsonl(sampled))
    rft = rft_rows(records, cfg.rft_per_task)
    pairs, pair_counts = turn_pairs(records, cfg.turn_pairs_per_task)
    for name, rows in (("rft_sft.jsonl", rft), ("dpo_turns.jsonl", pairs)):
        atomic.write_text(out / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    counts = {"rft_sft.jsonl": len(rft), "dpo_turns.jsonl": len(pairs)}
    summary = json.loads((out / "summary.json").read_text())
    summary["counts"].update(counts)
    summary["sampled"] = {"rollouts": str(sampled), "trajectories": len(records),
                          "passing": sum(bool(r.get("passed")) for r in records), "turn_pairs": pair_counts}
    atomic.write_json(out / "summary.json", summary)
    return counts


if __name__ == "__main__":
    main()
