"""First-turn check: the first reply of a model to N tasks of a split, parsed by the protocol's parser.

The inner loop of the warmup/SFT tuning (a full eval runs containers; this only generates): the first user
message is exactly the agent's (render_initial_prompt with the fresh shell's screen), sampling is the agent
protocol's (params `agent.temperature`, `agent.max_output_tokens`).

    python scripts/first_turn.py --base models/base [--adapter models/warmup] --split eval_id -n 16 \
        --out metrics/first_turn/warmup.json
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import click

from termagent import atomic
from termagent.agent import AgentConfig
from termagent.params import load_params, section
from termagent.policy.hf import HFPolicy
from termagent.protocol import parse_response, render_initial_prompt
from termagent.tasks.families.vocabulary import CITIES, PEOPLE, WORDS
from termagent.tasks.index import tasks_in_split

FRESH_SCREEN = "root@sandbox:/app#"  # what the tmux pane shows before the first command
# A pool word of the generated families not inside a longer word, optionally with its `_NN`.
NAME = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted({w for pool in (WORDS, CITIES, PEOPLE) for w in pool},
                                                      key=len, reverse=True)) + r")(?:_(\d\d)(?!\d))?(?![A-Za-z])")


def entity_names(text: str) -> set[str]:
    """The generated families' names `text` mentions (`violet_21`, `basil`)."""
    return {m.group(0) for m in NAME.finditer(text)}


@click.command()
@click.option("--base", required=True, type=click.Path(path_type=Path))
@click.option("--adapter", default=None, type=click.Path(path_type=Path))
@click.option("--split", default="eval_id", show_default=True)
@click.option("-n", "n_tasks", default=16, show_default=True, help="tasks (spread over the split, by id)")
@click.option("--samples", default=1, show_default=True, help="replies per task")
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default=None, type=click.Path(path_type=Path))
def main(base, adapter, split, n_tasks, samples, params_file, tasks_index, seed, out):
    agent = section(load_params(params_file), "agent", AgentConfig, file=str(params_file))
    tasks = sorted(tasks_in_split(tasks_index, split), key=lambda t: t.id)
    step = max(1, len(tasks) // n_tasks)
    tasks = tasks[::step][:n_tasks]
    policy = HFPolicy(base, adapter=adapter)
    batch = [[{"role": "user", "content": render_initial_prompt(t.instruction, FRESH_SCREEN)}]
             for t in tasks for _ in range(samples)]
    t0 = time.monotonic()
    gens = policy.generate(batch, max_tokens=agent.max_output_tokens, temperature=agent.temperature, seed=seed)
    wall = time.monotonic() - t0
    rows = []
    for index, gen in enumerate(gens):
        parsed = parse_response(gen.text)
        task = tasks[index // samples]
        keys = "".join(c.keystrokes for c in parsed.response.commands) if parsed.ok else ""
        # Copying from the task text: the generated families' names (word_NN stems, pool words) the
        # keystrokes use, and how many of them the instruction holds.
        typed, given = entity_names(keys), entity_names(task.instruction)
        rows.append({"task_id": task.id, "valid": bool(parsed.ok), "names_typed": sorted(typed),
                     "names_given": sorted(given), "names_copied": len(typed & given),
                     "strict": bool(parsed.ok and not parsed.fixes), "finish_reason": gen.finish_reason,
                     "completion_tokens": gen.completion_tokens, "errors": parsed.errors[:2], "text": gen.text[:400]})
    n = len(rows)
    summary = {"base": str(base), "adapter": str(adapter) if adapter else None, "split": split, "n": n,
               "temperature": agent.temperature, "max_tokens": agent.max_output_tokens,
               "valid_json": round(sum(r["valid"] for r in rows) / n, 3),
               "valid_json_strict": round(sum(r["strict"] for r in rows) / n, 3),
               # of the names the keystrokes typed, the share the instruction holds (None: no name typed)
               "names_from_task": (round(sum(r["names_copied"] for r in rows)
                                         / max(1, sum(len(r["names_typed"]) for r in rows)), 3)
                                   if any(r["names_typed"] for r in rows) else None),
               # replies whose keystrokes type every name of the instruction (families with names only)
               "all_names_typed": round(sum(r["names_copied"] == len(r["names_given"]) > 0 for r in rows)
                                        / max(1, sum(bool(r["names_given"]) for r in rows)), 3),
               "stopped": round(sum(r["finish_reason"] == "stop" for r in rows) / n, 3),
               "generate_s": round(wall, 1), "rows": rows}
    if out:
        atomic.write_json(out, summary)
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    for r in rows[:3]:
        click.echo(f"--- {r['task_id']} valid={r['valid']} {r['finish_reason']}\n{r['text'][:300]}")


if __name__ == "__main__":
    main()
