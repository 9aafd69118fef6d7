"""Copying measure over an eval's trajectories: does a model type the names its task gives it?

The generated families name their files with pool words and `word_NN` stems (`harbor_78.log`); a model
that solves them must copy those names from the instruction into its keystrokes. For every trial of a
generated family (task ids ending in `-NNNN`) this reads the first turn's keystrokes (parsed replies only)
and reports, of the pool names typed:
  - name_words_from_task: the share whose word (stem without `_NN`) is in the instruction;
  - word_nn_from_task: the share of `word_NN` stems typed exactly as the instruction has them.

    python scripts/copy_measure.py data/eval/warmup [--out metrics/experiments/x.json]
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from termagent import atomic
from termagent.train.augment import name_pattern

GENERATED = re.compile(r"-\d{4}$")


def first_turn_names(trajectories: list[dict]) -> dict:
    words = words_hit = stems = stems_hit = 0
    for trajectory in trajectories:
        if not GENERATED.search(trajectory["task_id"]) or not trajectory.get("turns"):
            continue
        turn = trajectory["turns"][0]
        if not turn.get("parse_ok"):
            continue
        instruction = turn["messages_in"][0]["content"].split("\nTask:\n", 1)[-1]
        given = {m.group(0) for m in name_pattern().finditer(instruction)}
        given_words = {m.group(1) for m in name_pattern().finditer(instruction)}
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
@click.option("--out", default=None, type=click.Path(path_type=Path))
def main(eval_dir: Path, out: Path | None) -> None:
    files = sorted((eval_dir / "trajectories").glob("*.json"))
    if not files:
        raise click.ClickException(f"{eval_dir}/trajectories holds no trajectory JSON")
    summary = {"eval_dir": str(eval_dir), **first_turn_names([json.loads(f.read_text()) for f in files])}
    if out:
        atomic.write_json(out, summary)
    click.echo(json.dumps(summary))


if __name__ == "__main__":
    main()
