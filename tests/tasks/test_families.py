"""Task families: deterministic bytes, real variety between siblings, one-command-per-line oracles, and
(with Docker) oracle 1 / nop 0 on one instance of every family, and a sibling's oracle failing."""

from __future__ import annotations

import filecmp
import os
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from termagent.tasks.families import FAMILIES, build_instance, generate, instance_rng, task_id
from termagent.tasks.families.base import DIFFICULTIES
from termagent.tasks.families.instances import GenerateConfig, generate_all
from termagent.tasks.load import discover_tasks, load_task

CATEGORIES = {m.CATEGORY for m in FAMILIES.values()}


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"", os.stat(p).st_mode)
            for p in sorted(root.rglob("*"))}


def test_registry_covers_enough_skills():
    assert len(FAMILIES) >= 12
    assert len(CATEGORIES) >= 8, CATEGORIES
    assert {"file_ops", "text_processing", "data_formats", "git", "permissions", "archives"} <= CATEGORIES


def test_same_params_same_bytes(tmp_path):
    cfg = GenerateConfig(instances=3, seed=5)
    generate_all(cfg, tmp_path / "a", progress=False)
    generate_all(cfg, tmp_path / "b", progress=False)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    generate_all(GenerateConfig(instances=3, seed=6), tmp_path / "c", progress=False)
    assert tree(tmp_path / "a") != tree(tmp_path / "c")


def test_adding_instances_or_families_keeps_every_other_task(tmp_path):
    small = GenerateConfig(families=["grep-count", "json-query"], instances=3)
    big = GenerateConfig(families=["file-move", "grep-count", "json-query", "tar-archive"], instances=6)
    generate_all(small, tmp_path / "small", progress=False)
    generate_all(big, tmp_path / "big", progress=False)
    for family in small.families:
        for i in range(3):
            name = task_id(family, i)
            cmp = filecmp.dircmp(tmp_path / "small" / name, tmp_path / "big" / name)
            assert tree(tmp_path / "small" / name) == tree(tmp_path / "big" / name), cmp.report()


def test_generated_tasks_load_with_metadata(tmp_path):
    generate_all(GenerateConfig(instances=2), tmp_path / "gen", progress=False)
    tasks = discover_tasks([tmp_path / "gen"])
    assert len(tasks) == 2 * len(FAMILIES)
    for t in tasks:
        assert t.metadata["family"] in FAMILIES and t.difficulty in DIFFICULTIES
        assert t.category == FAMILIES[t.metadata["family"]].CATEGORY and t.tags
        assert not t.environment.network and t.environment.workdir == "/app"
        assert t.environment.dockerfile.read_text().startswith("FROM debian:bookworm-slim\n")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ladder_and_plain_oracle_lines(family):
    """Every rung builds; easy is one command, medium 2-3 at most, hard has several (inspect, act,
    verify); every oracle line is one plain command (demos make a terminal turn of each)."""
    lengths = {}
    for difficulty in DIFFICULTIES:
        for i in range(6):
            inst, _ = build_instance(family, instance_rng(1, family, i), difficulty)
            lengths.setdefault(difficulty, []).append(len(inst.solve))
            for line in inst.solve:
                assert "\n" not in line and "<<" not in line and not line.endswith("\\"), line
                assert not re.match(r"^\s*(function\s|\w+\s*\(\)\s*\{)", line), line
            assert inst.instruction.count("\n") <= 3, "instructions stay short"
    assert max(lengths["easy"]) == 1, lengths
    assert 2 <= min(lengths["medium"]) and max(lengths["medium"]) <= 4, lengths
    assert min(lengths["hard"]) >= 3, lengths


def test_easy_arguments_come_from_the_instruction():
    """An easy oracle's names and values appear verbatim in the instruction (a small model copies them)."""
    for family in FAMILIES:
        for i in range(5):
            inst, _ = build_instance(family, instance_rng(2, family, i), "easy")
            for path in re.findall(r"/app/[\w./-]+", inst.solve[0]):
                assert path in inst.instruction, (family, path, inst.instruction)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_siblings_differ_in_names_and_contents(family):
    rng_a, rng_b = instance_rng(0, family, 0), instance_rng(0, family, 1)
    for difficulty in DIFFICULTIES:
        a, _ = build_instance(family, random.Random(rng_a.random()), difficulty)
        b, _ = build_instance(family, random.Random(rng_b.random()), difficulty)
        assert a.instruction != b.instruction
        assert a.solve != b.solve
        assert a.files != b.files or a.consts != b.consts


def test_difficulty_mix_is_mostly_easy_and_medium(tmp_path):
    summary = generate_all(GenerateConfig(instances=24), tmp_path / "gen", progress=False)
    totals = {d: sum(c[d] for c in summary["by_family"].values()) for d in DIFFICULTIES}
    assert totals["hard"] < totals["easy"] and totals["hard"] < totals["medium"]
    assert totals["hard"] > 0


# ---- with Docker: the instances really work ------------------------------------------------------------

def one_per_family(root: Path) -> list[Path]:
    """One instance of every family, the rungs cycling so each difficulty is exercised."""
    dirs = []
    for k, family in enumerate(sorted(FAMILIES)):
        dirs.append(generate(family, instance_rng(0, family, 0), 0, root, difficulty=DIFFICULTIES[k % 3]))
    return dirs


def test_oracle_and_nop_on_one_instance_of_every_family(tmp_path, base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig, run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent

    tasks = [load_task(d) for d in one_per_family(tmp_path / "gen")]
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4), client=docker_client)
    try:
        results = run_trials(sandbox, [(t, agent, 0) for t in tasks for agent in (OracleAgent(), NopAgent())])
    finally:
        sandbox.close()
    by = {(r.task_id, r.agent): r for r in results}
    bad = [(t.id, by[(t.id, "oracle")].reward, by[(t.id, "nop")].reward, by[(t.id, "oracle")].verifier_output[-800:])
           for t in tasks if by[(t.id, "oracle")].reward != 1.0 or by[(t.id, "nop")].reward != 0.0]
    assert not bad, bad
    assert all(by[(t.id, "oracle")].image.get("placed") for t in tasks), "generated tasks are never built"


def test_a_siblings_oracle_fails(tmp_path, base_image, docker_client):
    """Replaying one instance's commands on its sibling does not pass the sibling's tests."""
    from termagent.sandbox import Sandbox, SandboxConfig, run_trials
    from termagent.sandbox.agents import OracleAgent

    pairs = []
    for family in ("grep-count", "json-query", "chmod-mode", "tar-archive"):
        a = load_task(generate(family, instance_rng(3, family, 0), 0, tmp_path / "a", difficulty="easy"))
        b = load_task(generate(family, instance_rng(3, family, 1), 1, tmp_path / "b", difficulty="easy"))
        pairs.append(replace(b, solution=a.solution))  # b's container and tests, a's oracle
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4), client=docker_client)
    try:
        results = run_trials(sandbox, [(t, OracleAgent(), 0) for t in pairs])
    finally:
        sandbox.close()
    assert [r.reward for r in results] == [0.0] * len(pairs), [(r.task_id, r.reward, r.error) for r in results]
