"""Task families: generators of many similar-but-different Harbor tasks on the shared base image.

    from termagent.tasks.families import FAMILIES, generate
    generate("grep-count", random.Random(...), 3, out_dir)   # -> out_dir/grep-count-0003/

One module per family (NAME, CATEGORY, TAGS, build(rng, difficulty) -> Instance); FAMILIES is the
registry, in a fixed order. The `generate` stage (stages/generate.py -> instances.generate_all)
writes data/generated/ from params `generate:`.
"""

from __future__ import annotations

import random
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
from termagent.tasks.families.base import Instance, pick_difficulty, write_task

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


def build_instance(family: str, rng: random.Random, difficulty: str | None = None) -> tuple[Instance, str]:
    module = family_module(family)
    difficulty = difficulty or pick_difficulty(rng)
    return module.build(rng, difficulty), difficulty


def generate(family: str, rng: random.Random, index: int, out_dir: Path, difficulty: str | None = None) -> Path:
    """Write instance `index` of `family` as a complete Harbor task directory under out_dir."""
    module = family_module(family)
    inst, difficulty = build_instance(family, rng, difficulty)
    return write_task(Path(out_dir) / task_id(family, index), inst, family=family, difficulty=difficulty,
                      category=module.CATEGORY, tags=list(module.TAGS))
