"""What a family generator returns (`Instance`) and how it becomes a Harbor task directory.

A family module defines NAME, CATEGORY, TAGS and `build(rng, difficulty) -> Instance`; everything an
instance varies (names, contents, keywords, numbers) comes from `rng`, so the same (seed, family,
index) always gives the same bytes.

Rungs (RUNGS, easiest first): `command` and `shape` are the easy task with a hint a user could give: the
exact command to run (`command`), or the command's form with blanks to fill from the instruction (`shape`,
each family's `Instance.shape`); `easy`, `medium` and `hard` take the hints away. A rung changes only the
instruction: the files, the tests and the oracle are its difficulty's. The task directory written here:

    task.toml                 [metadata] family, rung, difficulty, category, tags; no network; workdir /app
    instruction.md            short, regular wording within a family
    environment/Dockerfile    FROM debian:bookworm-slim (aliased to the local base) + WORKDIR + COPY
    environment/files/...     the instance's files, copied to /app
    tests/test.sh             pytest; reward.txt 1 when every test passed (the verifier records the
                              pytest counts for partial credit)
    tests/test_outputs.py     the family's checks + an input-untouched check (sha256 of the inputs)
    solution/solve.sh         the oracle: one plain command per line (demos turn each line into a turn)
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from termagent.tasks.families.vocabulary import CITIES, EXTS, LEVELS, PEOPLE, WORDS  # noqa: F401 (the families import them from here)

DIFFICULTIES = ("easy", "medium", "hard")
RUNGS = ("command", "shape", "easy", "medium", "hard")
RUNG_DIFFICULTY = {"command": "easy", "shape": "easy", "easy": "easy", "medium": "medium", "hard": "hard"}
# The embedded default mix (params `generate.rung_weights`): most instances hinted, so a 135M warmup solves
# some of every family; medium and hard stay, fewer, for the way up.
DEFAULT_RUNG_WEIGHTS = MappingProxyType({"command": 0.35, "shape": 0.3, "easy": 0.15, "medium": 0.15, "hard": 0.05})

DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n"

TEST_SH = """#!/bin/bash
# Verifier: runs the checks and writes the reward Harbor reads (pytest counts give partial credit).
mkdir -p /logs/verifier
cd /app 2>/dev/null || true
python3 -m pytest -q -rA -p no:cacheprovider /tests/test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

TEST_HEADER = '''import hashlib
import os
import stat
import subprocess
from pathlib import Path

'''

TEST_UNTOUCHED = '''

def test_inputs_untouched():
    for path, digest in INPUT_SHA256.items():
        assert Path(path).is_file(), f"{path} is missing"
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, f"{path} was modified"
'''

TOML = """version = "1.0"

[metadata]
author_name = "termagent"
family = "{family}"
rung = "{rung}"
difficulty = "{difficulty}"
category = "{category}"
tags = [{tags}]

[agent]
timeout_sec = {agent_timeout}

[verifier]
timeout_sec = 60

[environment]
build_timeout_sec = 300
cpus = 1
memory_mb = 512
storage_mb = 1024
network_mode = "no-network"
workdir = "/app"
"""


@dataclass
class Instance:
    """One generated task, before it is written out."""

    instruction: str
    files: dict[str, str | bytes]  # path under /app -> contents (written mode 0644, dirs 0755)
    solve: list[str]  # oracle commands, one per line (no heredocs, functions or continuation lines)
    tests: str  # pytest functions (module source); may use the names in `consts`
    consts: dict[str, object] = field(default_factory=dict)  # module-level constants of the tests
    untouched: list[str] | None = None  # inputs whose bytes the tests pin (None: every file)
    tags: list[str] = field(default_factory=list)  # on top of the family's TAGS
    shape: str = ""  # easy only: the oracle command's form, blanks in capitals (`grep -c WORD FILE > OUTPUT`)


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def pick_rung(rng: random.Random, weights: Mapping[str, float]) -> str:
    """One rung drawn with `weights` (rung -> weight, absent = 0), always in RUNGS order: the mapping's own
    order never changes a draw."""
    return rng.choices(RUNGS, weights=[weights.get(r, 0.0) for r in RUNGS])[0]


def with_hint(inst: Instance, rung: str, family: str) -> Instance:
    """The instance as `rung` words it: the easy instruction plus the command (`command`) or its form
    (`shape`); other rungs unchanged."""
    if rung == "command":
        commands = ", then ".join(f"`{c}`" for c in inst.solve)
        return replace(inst, instruction=f"{inst.instruction.rstrip()} Run {commands}.")
    if rung == "shape":
        if not inst.shape:
            raise ValueError(f"{family}: the easy instance has no command shape for the `shape` rung")
        return replace(inst, instruction=f"{inst.instruction.rstrip()} Use a command of the form `{inst.shape}`.")
    return inst


def render_tests(inst: Instance) -> str:
    paths = inst.untouched if inst.untouched is not None else sorted(inst.files)
    digests = {f"/app/{p}": sha256(inst.files[p]) for p in sorted(paths)}
    lines = [TEST_HEADER.rstrip("\n"), "", f"INPUT_SHA256 = {digests!r}"]
    lines += [f"{name} = {value!r}" for name, value in inst.consts.items()]
    return "\n".join(lines) + "\n" + TEST_UNTOUCHED + "\n" + inst.tests.strip("\n") + "\n"


def _write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)


def write_task(task_dir: Path, inst: Instance, *, family: str, rung: str, category: str,
               tags: list[str]) -> Path:
    """Write `inst` as a Harbor task directory (replacing nothing: the directory must not exist)."""
    for line in inst.solve:
        if "\n" in line or line.rstrip().endswith("\\") or "<<" in line:
            raise ValueError(f"{family}: solve.sh line is not one plain command: {line!r}")
    difficulty = RUNG_DIFFICULTY[rung]
    task_dir.mkdir(parents=True)
    all_tags = list(dict.fromkeys([*tags, *inst.tags]))
    timeout = {"easy": 120, "medium": 180, "hard": 300}[difficulty]
    _write(task_dir / "task.toml", TOML.format(family=family, rung=rung, difficulty=difficulty, category=category,
                                               tags=", ".join(f'"{t}"' for t in all_tags),
                                               agent_timeout=timeout))
    _write(task_dir / "instruction.md", inst.instruction.strip() + "\n")
    _write(task_dir / "environment" / "Dockerfile", DOCKERFILE)
    for rel, data in sorted(inst.files.items()):
        _write(task_dir / "environment" / "files" / rel, data)
    _write(task_dir / "tests" / "test.sh", TEST_SH, 0o755)
    _write(task_dir / "tests" / "test_outputs.py", render_tests(inst))
    _write(task_dir / "solution" / "solve.sh", "#!/bin/bash\nset -euo pipefail\n" + "\n".join(inst.solve) + "\n",
           0o755)
    for d in [task_dir, *(p for p in task_dir.rglob("*") if p.is_dir())]:
        os.chmod(d, 0o755)
    return task_dir


# ---- shared vocabulary: instances draw their names and contents from these --------------------------



def words(rng: random.Random, k: int, pool: tuple[str, ...] = WORDS) -> list[str]:
    return rng.sample(pool, k)


def name(rng: random.Random) -> str:
    """A file/dir name stem like `cedar_42`."""
    return f"{rng.choice(WORDS)}_{rng.randint(10, 99)}"


def sentence(rng: random.Random, n: int = 6, avoid: tuple[str, ...] = ()) -> str:
    pool = tuple(w for w in WORDS if w not in avoid)
    return " ".join(rng.choice(pool) for _ in range(n))
