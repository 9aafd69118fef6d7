"""DVC stage `curate`: the multi-turn RL task list, in data/curated.

    python stages/curate.py --rates data/sample/dpo/rates.json --index data/tasks.json \
        --out data/curated                           # what `dvc repro curate` runs
    python stages/curate.py --rollouts /tmp/synthetic.jsonl --out /tmp/curated
    termagent curate ...                             # the same command

Eval tasks come from the task index's `split` (data/tasks.json): curation never selects them, nor a
training task that near-duplicates one. Reads params: curate (all keys), judge (all keys), tasks.dirs.
Writes data/curated/{rl_tasks_mt.json, task_analysis.json, contamination.json, skill_histogram.json,
skill_histogram.png}.
"""

from __future__ import annotations

from termagent.curate.cli import curate as main  # the one definition of the options: `termagent curate`

if __name__ == "__main__":
    main()
