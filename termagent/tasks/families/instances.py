"""The `generate` stage's library side: params `generate:` -> data/generated/<family>-<index>/.

The output directory is rebuilt from scratch in a temporary sibling and swapped in, so a crash never
leaves half a set; the same params give byte-identical files (no timestamps, fixed modes).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from termagent.tasks.families import FAMILIES, generate, instance_rng


@dataclass
class GenerateConfig:
    """params.yaml `generate:` section."""

    # Families to generate (empty: every registered family). The embedded default is all of them.
    families: list[str] = field(default_factory=list)
    instances: int = 24  # per family: enough held-out instances and training variety on 2 cores
    seed: int = 0  # instance (seed, family, index) -> bytes; change it to draw a new set

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise ValueError(f"generate.instances must be >= 1, got {self.instances}")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValueError(f"generate.families: unknown {unknown}; known: {', '.join(FAMILIES)}")

    @property
    def family_names(self) -> list[str]:
        return list(self.families) or list(FAMILIES)


def generate_all(cfg: GenerateConfig, out: str | Path, progress: bool = True) -> dict:
    """Write every instance under `out` (replaced as a whole); returns a summary."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    counts: Counter = Counter()
    jobs = [(f, i) for f in cfg.family_names for i in range(cfg.instances)]
    for family, index in tqdm(jobs, desc="generate", disable=not progress, unit="task"):
        task_dir = generate(family, instance_rng(cfg.seed, family, index), index, tmp)
        difficulty = next(line for line in (task_dir / "task.toml").read_text().splitlines()
                          if line.startswith("difficulty")).split('"')[1]
        counts[(family, difficulty)] += 1
    summary = {
        "families": len(cfg.family_names),
        "instances": len(jobs),
        "by_family": {f: {d: counts[(f, d)] for d in ("easy", "medium", "hard")} for f in cfg.family_names},
        "seed": cfg.seed,
    }
    (tmp / "generated.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if out.exists():
        old = out.with_name(out.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)
    return summary
