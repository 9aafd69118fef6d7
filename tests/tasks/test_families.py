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
from termagent.tasks.families.base import DIFFICULTIES, RUNG_DIFFICULTY, RUNGS
from termagent.tasks.families.instances import GenerateConfig, generate_all
from termagent.tasks.load import discover_tasks, load_task
from termagent.train.sft import example_group

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
        assert t.metadata["family"] in FAMILIES and t.metadata["rung"] in RUNGS
        assert t.difficulty == RUNG_DIFFICULTY[t.metadata["rung"]]
        assert example_group(t.id) == t.metadata["family"]  # the warmup's family-balanced order reads ids
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


def test_rung_mix_follows_the_weights(tmp_path):
    summary = generate_all(GenerateConfig(instances=24), tmp_path / "gen", progress=False)
    totals = {r: sum(c[r] for c in summary["by_family"].values()) for r in RUNGS}
    assert totals["command"] + totals["shape"] > sum(totals.values()) / 2, totals  # mostly hinted
    assert all(totals[r] > 0 for r in RUNGS), totals
    only = generate_all(GenerateConfig(instances=4, families=["grep-count"], rung_weights={"shape": 1.0}),
                        tmp_path / "only", progress=False)
    assert only["by_family"]["grep-count"]["shape"] == 4


@pytest.mark.parametrize("weights", [{"trivial": 1.0}, {"easy": -0.5}, {"easy": 0, "hard": 0}, {"easy": "x"}])
def test_rung_weights_are_validated(weights):
    with pytest.raises(ValueError, match="generate.rung_weights"):
        GenerateConfig(rung_weights=weights)


def test_rung_weights_order_never_changes_a_draw(tmp_path):
    a = GenerateConfig(instances=6, families=["sed-replace"], rung_weights={"command": 1, "hard": 1})
    b = GenerateConfig(instances=6, families=["sed-replace"], rung_weights={"hard": 1, "command": 1})
    generate_all(a, tmp_path / "a", progress=False)
    generate_all(b, tmp_path / "b", progress=False)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hint_rungs_word_the_easy_task(family):
    """`command` and `shape` are the easy instance (same files, tests, oracle) with a hint: the oracle's own
    command, or its form with blanks in capitals; `easy` names no command."""
    for i in range(4):
        easy, _ = build_instance(family, instance_rng(4, family, i), "easy")
        for rung in ("command", "shape"):
            hinted, got = build_instance(family, instance_rng(4, family, i), rung)
            assert got == rung and hinted.instruction.startswith(easy.instruction)
            assert (hinted.files, hinted.solve, hinted.tests, hinted.consts) == \
                (easy.files, easy.solve, easy.tests, easy.consts)
        command, _ = build_instance(family, instance_rng(4, family, i), "command")
        assert f"`{easy.solve[0]}`" in command.instruction
        shape, _ = build_instance(family, instance_rng(4, family, i), "shape")
        assert easy.shape and f"`{easy.shape}`" in shape.instruction
        assert re.search(r"\b[A-Z]{3,}\b", easy.shape), "a shape leaves blanks to fill"
        assert easy.solve[0].split()[0] == easy.shape.split()[0], "the shape names the oracle's tool"
        assert easy.solve[0] not in easy.instruction


# ---- with Docker: the instances really work ------------------------------------------------------------

def one_per_family(root: Path) -> list[Path]:
    """One instance of every family, the rungs cycling so each difficulty is exercised (the hint rungs are
    the easy instances: test_oracle_at_the_hint_rung_of_every_family runs them)."""
    dirs = []
    for k, family in enumerate(sorted(FAMILIES)):
        dirs.append(generate(family, instance_rng(0, family, 0), 0, root, rung=DIFFICULTIES[k % 3]))
    return dirs


def oracle_and_nop(tasks, base_image, docker_client) -> list:
    """The tasks whose oracle does not earn 1 or whose nop does not earn 0 (real containers)."""
    from termagent.sandbox import Sandbox, SandboxConfig, run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent

    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4), client=docker_client)
    try:
        results = run_trials(sandbox, [(t, agent, 0) for t in tasks for agent in (OracleAgent(), NopAgent())])
    finally:
        sandbox.close()
    by = {(r.task_id, r.agent): r for r in results}
    assert all(by[(t.id, "oracle")].image.get("placed") for t in tasks), "generated tasks are never built"
    return [(t.id, by[(t.id, "oracle")].reward, by[(t.id, "nop")].reward, by[(t.id, "oracle")].verifier_output[-800:])
            for t in tasks if by[(t.id, "oracle")].reward != 1.0 or by[(t.id, "nop")].reward != 0.0]


def test_oracle_and_nop_on_one_instance_of_every_family(tmp_path, base_image, docker_client):
    tasks = [load_task(d) for d in one_per_family(tmp_path / "gen")]
    bad = oracle_and_nop(tasks, base_image, docker_client)
    assert not bad, bad


def test_oracle_at_the_hint_rung_of_every_family(tmp_path, base_image, docker_client):
    """Every family's `command` rung (its files, tests and oracle are also the `shape` rung's) in a real
    container: the oracle earns 1, doing nothing 0."""
    tasks = [load_task(generate(family, instance_rng(5, family, 0), 0, tmp_path / "gen", rung="command"))
             for family in sorted(FAMILIES)]
    assert all(t.metadata["rung"] == "command" and "Run `" in t.instruction for t in tasks)
    bad = oracle_and_nop(tasks, base_image, docker_client)
    assert not bad, bad


def test_a_siblings_oracle_fails(tmp_path, base_image, docker_client):
    """Replaying one instance's commands on its sibling does not pass the sibling's tests."""
    from termagent.sandbox import Sandbox, SandboxConfig, run_trials
    from termagent.sandbox.agents import OracleAgent

    pairs = []
    for family in ("grep-count", "json-query", "chmod-mode", "tar-archive"):
        a = load_task(generate(family, instance_rng(3, family, 0), 0, tmp_path / "a", rung="easy"))
        b = load_task(generate(family, instance_rng(3, family, 1), 1, tmp_path / "b", rung="easy"))
        pairs.append(replace(b, solution=a.solution))  # b's container and tests, a's oracle
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4), client=docker_client)
    try:
        results = run_trials(sandbox, [(t, OracleAgent(), 0) for t in pairs])
    finally:
        sandbox.close()
    assert [r.reward for r in results] == [0.0] * len(pairs), [(r.task_id, r.reward, r.error) for r in results]
