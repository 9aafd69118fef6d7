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
from termagent.tasks.families.base import DEFAULT_RUNG_WEIGHTS, RUNGS


@dataclass
class GenerateConfig:
    """params.yaml `generate:` section."""

    # Families to generate (empty: every registered family). The embedded default is all of them.
    families: list[str] = field(default_factory=list)
    instances: int = 24  # per family: enough held-out instances and training variety on 2 cores
    seed: int = 0  # instance (seed, family, index) -> bytes; change it to draw a new set
    # rung -> weight of the mix each instance's rung is drawn from (base.RUNGS; an absent rung: weight 0)
    rung_weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RUNG_WEIGHTS))

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise ValueError(f"generate.instances must be >= 1, got {self.instances}")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValueError(f"generate.families: unknown {unknown}; known: {', '.join(FAMILIES)}")
        bad = sorted(set(self.rung_weights) - set(RUNGS))
        if bad:
            raise ValueError(f"generate.rung_weights: unknown rung(s) {bad}; known: {', '.join(RUNGS)}")
        for rung, weight in self.rung_weights.items():
            if not isinstance(weight, int | float) or isinstance(weight, bool) or not weight >= 0:
                raise ValueError(f"generate.rung_weights.{rung}: a weight must be a number >= 0, got {weight!r}")
        if not sum(self.rung_weights.values()) > 0:
            raise ValueError(f"generate.rung_weights: at least one weight must be > 0, got {self.rung_weights}")

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
        task_dir = generate(family, instance_rng(cfg.seed, family, index), index, tmp, weights=cfg.rung_weights)
        rung = next(line for line in (task_dir / "task.toml").read_text().splitlines()
                    if line.startswith("rung")).split('"')[1]
        counts[(family, rung)] += 1
    summary = {
        "families": len(cfg.family_names),
        "instances": len(jobs),
        "by_family": {f: {r: counts[(f, r)] for r in RUNGS} for f in cfg.family_names},
        "rung_weights": {r: cfg.rung_weights.get(r, 0.0) for r in RUNGS},
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
