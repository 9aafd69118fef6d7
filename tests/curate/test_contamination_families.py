"""The contamination guard knows task families: held-out siblings are reported as in-distribution
near-duplicates (never excluding their training siblings), and held-out families stay below the
threshold against every training family — checked on the real generated set."""

from __future__ import annotations

from termagent.curate.contamination import ContaminationConfig, find_contamination
from termagent.judge import load_task_contexts
from termagent.tasks.families import FAMILIES
from termagent.tasks.families.instances import GenerateConfig, generate_all
from termagent.tasks.load import discover_tasks
from termagent.tasks.split import assign_split_groups

OOD = ["sqlite-query", "tar-archive"]


def test_families_and_ood(tmp_path):
    generate_all(GenerateConfig(instances=10), tmp_path / "gen", progress=False)
    tasks = discover_tasks([tmp_path / "gen"])
    split = assign_split_groups(tasks, 0.25, 0, "difficulty", id_fraction=0.2, ood_families=OOD)
    contexts = load_task_contexts([tmp_path / "gen"])
    train = [contexts[i] for i, s in split.items() if s == "train"]
    held = [contexts[i] for i, s in split.items() if s != "train"]
    report = find_contamination(train, held, ContaminationConfig())
    assert report.excluded_train_ids == [], report.pairs[:5]  # nothing dropped: siblings are expected
    assert set(report.in_distribution) == set(FAMILIES) - set(OOD)
    assert any(e["n_pairs_over_threshold"] > 0 for e in report.in_distribution.values())  # near-duplicates by design
    assert set(report.ood_max_similarity) == set(OOD)
    for family, row in report.ood_max_similarity.items():
        assert set(row) == set(FAMILIES) - set(OOD)
        assert max(row.values()) < report.threshold, (family, row)


def test_hand_written_near_duplicate_is_still_excluded(tmp_path):
    generate_all(GenerateConfig(families=["grep-count"], instances=2), tmp_path / "gen", progress=False)
    contexts = load_task_contexts([tmp_path / "gen"])
    a, b = (contexts[k] for k in sorted(contexts))
    from dataclasses import replace

    plain = replace(b, id="hand-copy", metadata={})  # the same text, but not a family sibling
    report = find_contamination([a], [plain])
    sim = report.pairs[0]["similarity"] if report.pairs else 0
    same = find_contamination([replace(a, id="t", metadata={})], [replace(a, id="e", metadata={})])
    assert same.excluded_train_ids == ["t"] and same.pairs[0]["similarity"] == 1.0
    assert sim < 1.0
