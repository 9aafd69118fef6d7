"""Copying measure over an eval's trajectories: does a model type the names its task gives it?

The generated families name their files with pool words and `word_NN` stems (`harbor_78.log`); a model
that solves them must copy those names from the instruction into its keystrokes. For every trial of a
generated family (a task the index `--tasks` gives a family) this reads the first turn's keystrokes (parsed replies only)
and reports, of the pool names typed:
  - name_words_from_task: the share whose word (stem without `_NN`) is in the instruction;
  - word_nn_from_task: the share of `word_NN` stems typed exactly as the instruction has them.

    python scripts/copy_measure.py data/eval/warmup [--tasks data/tasks.json] [--out metrics/experiments/x.json]
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from termagent import atomic
from termagent.tasks.index import read_index
from termagent.train.augment import name_pattern


def first_turn_names(trajectories: list[dict], families: set[str]) -> dict:
    """`families`: the ids of the tasks that belong to a generated family."""
    words = words_hit = stems = stems_hit = 0
    for trajectory in trajectories:
        if trajectory["task_id"] not in families or not trajectory.get("turns"):
            continue
        turn = trajectory["turns"][0]
        if not turn.get("parse_ok"):
            continue
        instruction = turn["messages_in"][0]["content"].split("\nTask:\n", 1)[-1]
        found = list(name_pattern().finditer(instruction))
        given, given_words = {m.group(0) for m in found}, {m.group(1) for m in found}
        keys = "".join(c.get("keystrokes", "") for c in turn["keystrokes"] or [])
        for m in name_pattern().finditer(keys):
            words += 1
            words_hit += m.group(1) in given_words
            if m.group(2) is not None:
                stems += 1
                stems_hit += m.group(0) in given
    return {"name_words_from_task": round(words_hit / words, 3) if words else None, "n_words": words,
            "word_nn_from_task": round(stems_hit / stems, 3) if stems else None, "n_word_nn": stems}


@click.command()
@click.argument("eval_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tasks", "tasks_index", default="data/tasks.json", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path))
def main(eval_dir: Path, tasks_index: Path, out: Path | None) -> None:
    files = sorted((eval_dir / "trajectories").glob("*.json"))
    if not files:
        raise click.ClickException(f"{eval_dir}/trajectories holds no trajectory JSON")
    families = {t["id"] for t in read_index(tasks_index)["tasks"] if t.get("family")}
    summary = {"eval_dir": str(eval_dir),
               **first_turn_names([json.loads(f.read_text()) for f in files], families)}
    if out:
        atomic.write_json(out, summary)
    click.echo(json.dumps(summary))


if __name__ == "__main__":
    main()
