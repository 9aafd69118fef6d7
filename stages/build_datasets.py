"""DVC stage `datasets` (this file is not named datasets.py: a script directory on sys.path named so would
shadow the Hugging Face `datasets` package that TRL imports): the six training datasets from the GRPO rollouts,
in data/datasets.

    python stages/build_datasets.py                        # what `dvc repro datasets` runs
    python stages/build_datasets.py --rollouts /tmp/synthetic.jsonl --out /tmp/datasets
    termagent datasets build ...                           # the same command

Reads params: datasets (all keys), judge (all keys), tasks.dirs.
Writes data/datasets/{sft,dpo,dpo_filtered,api_sft,prm_sequence,prm_step}.jsonl, the removed-pairs
sidecar dpo_filtered.removed.jsonl, and summary.json (counts, malformed lines, judge and version).
With --sampled (the sample stage's multi-turn trajectories of the start policy on train tasks) also
rft_sft.jsonl (verified passing trajectories) and dpo_turns.jsonl (a pass and a fail of one task, at the turn
where they part): termagent/datasets/trajectories.py.
"""

from __future__ import annotations

from termagent.datasets.cli import (
    build as main,  # the one definition of the options: `termagent datasets build`
)

if __name__ == "__main__":
    main()
