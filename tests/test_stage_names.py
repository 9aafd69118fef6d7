"""Every eval stage name the docs, params comments, profiles and docstrings give is a stage `dvc stage list` knows
(`foreach` expanded): `dvc repro mt_grpo_eval` and `dvc repro eval@grpo` as written must run (issue 43)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("base", "warmup", "grpo", "sft", "dpo", "mt_grpo")
# <model>_eval (the names of the eval stages before the foreach) and eval@<x>; `eval@<model>` is the foreach's own
# placeholder, eval@{...} an f-string that builds a foreach name
SUFFIXED = re.compile(r"(?<![\w-])((?:" + "|".join(MODELS) + r"|<model>)_eval)\b")
AT = re.compile(r"(?<![\w-])(eval@[\w<>{}.$-]+)")
# eval@<model> is the foreach's placeholder; a middle model's eval is a stage once eval.models lists it (sft is opt-in)
PLACEHOLDERS = {"eval@<model>", *(f"eval@{m}" for m in MODELS if m != "mt_grpo")}
SOURCES = ("docs", "README.md", "params.yaml", "profiles", "stages", "termagent", "scripts", "Makefile", "dvc.yaml")


def stage_names() -> set[str]:
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        return {stage.addressing.split(":")[-1] for stage in repo.index.stages}


def files() -> list[Path]:
    out = []
    for name in SOURCES:
        path = REPO / name
        out += [path] if path.is_file() else sorted(p for p in path.rglob("*")
                                                    if p.suffix in (".md", ".py", ".yaml") and p.is_file())
    return out


def test_every_eval_stage_name_written_is_a_stage():
    names = stage_names()
    assert {"mt_grpo_eval", "eval@base", "eval@warmup", "eval@grpo", "eval@dpo", "report"} <= names
    stale = []
    for path in files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in [*SUFFIXED.findall(line), *AT.findall(line)]:
                name = match.rstrip(".")
                if name not in names and name not in PLACEHOLDERS and "{" not in name:
                    stale.append(f"{path.relative_to(REPO)}:{number}: {name}")
    assert not stale, "stage names dvc.yaml does not define:\n" + "\n".join(stale)


def test_the_stale_patterns_would_be_caught():
    assert SUFFIXED.findall("`warmup_eval` and dpo_eval, not run_local_eval") == ["warmup_eval", "dpo_eval"]
    assert AT.findall("dvc repro eval@mt_grpo.") == ["eval@mt_grpo."]
    assert "eval@mt_grpo" not in PLACEHOLDERS and "mt_grpo_eval" in stage_names()
