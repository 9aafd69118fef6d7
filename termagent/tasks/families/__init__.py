"""Task families: generators of many similar-but-different Harbor tasks on the shared base image.

    from termagent.tasks.families import FAMILIES, generate
    generate("grep-count", random.Random(...), 3, out_dir)   # -> out_dir/grep-count-0003/

One module per family (NAME, CATEGORY, TAGS, build(rng, difficulty) -> Instance); FAMILIES is the
registry, in a fixed order. An instance's rung (base.RUNGS: `command`, `shape`, `easy`, `medium`, `hard`) is
drawn first from its own generator, with the `generate.rung_weights` mix. The `generate` stage (stages/generate.py -> instances.generate_all)
writes data/generated/ from params `generate:`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from termagent.tasks.families import (
    background_job,
    bash_script,
    chmod_mode,
    csv_column,
    file_move,
    find_files,
    git_commit,
    grep_count,
    json_query,
    passwd_query,
    python_function,
    sed_replace,
    sqlite_query,
    tar_archive,
)
from termagent.tasks.families.base import (
    DEFAULT_RUNG_WEIGHTS,
    RUNG_DIFFICULTY,
    Instance,
    pick_rung,
    with_hint,
    write_task,
)

# Registry order is part of nothing but listings: ids, bytes and splits never depend on it.
_MODULES: tuple[ModuleType, ...] = (
    file_move, grep_count, sed_replace, json_query, csv_column, sqlite_query,
    git_commit, chmod_mode, tar_archive, bash_script, python_function, passwd_query, find_files, background_job,
)
FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in _MODULES}


def family_module(family: str) -> ModuleType:
    try:
        return FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown task family {family!r}; known: {', '.join(FAMILIES)}") from None


def task_id(family: str, index: int) -> str:
    return f"{family}-{index:04d}"


def instance_rng(seed: int, family: str, index: int) -> random.Random:
    """One generator per (seed, family, index): adding families or instances never changes another's bytes."""
    return random.Random(f"termagent-families:{seed}:{family}:{index}")


def build_instance(family: str, rng: random.Random, rung: str | None = None,
                   weights: Mapping[str, float] = DEFAULT_RUNG_WEIGHTS) -> tuple[Instance, str]:
    """Instance of `family` at `rung` (None: drawn from `rng` with `weights`), and the rung."""
    module = family_module(family)
    rung = rung or pick_rung(rng, weights)
    if rung not in RUNG_DIFFICULTY:
        raise ValueError(f"unknown rung {rung!r}; known: {', '.join(RUNG_DIFFICULTY)}")
    return with_hint(module.build(rng, RUNG_DIFFICULTY[rung]), rung, family), rung


def generate(family: str, rng: random.Random, index: int, out_dir: Path, rung: str | None = None,
             weights: Mapping[str, float] = DEFAULT_RUNG_WEIGHTS) -> Path:
    """Write instance `index` of `family` as a complete Harbor task directory under out_dir."""
    module = family_module(family)
    inst, rung = build_instance(family, rng, rung, weights)
    return write_task(Path(out_dir) / task_id(family, index), inst, family=family, rung=rung,
                      category=module.CATEGORY, tags=list(module.TAGS))
