"""`termagent datasets synth|build` and `termagent curate` end to end on small task dirs."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest
from click.testing import CliRunner

from termagent.cli import main
from termagent.datasets import OUTPUT_FILES, solution_commands
from termagent.datasets.sample_tasks import write_task


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    write_task(root, "count-lines", instruction="Write the number of lines of /app/in.txt to /app/out.txt. "
               "Do not modify /app/in.txt.", files={"in.txt": "a\nb\n"}, category="text_processing",
               solution="#!/bin/bash\nset -e\ncd /app\nwc -l < in.txt > out.txt\n",
               tests="def test_a(): pass\ndef test_b(): pass\ndef test_c(): pass\ndef test_d(): pass\n")
    write_task(root, "make-report", instruction="Create /app/report.md with a title line from /app/title.txt.",
               files={"title.txt": "Hello\n"}, category="file_ops", difficulty="hard",
               solution="#!/bin/bash\ncat > /app/report.md <<'EOF'\n# Report\nEOF\ncat /app/title.txt >> /app/report.md\n")
    write_task(root, "git-tagging", instruction="Tag the latest commit of the repository in /app/repo as v1.0 "
               "with an annotated tag whose message is 'first release', then write the tag name to /app/tag.txt.",
               category="git", difficulty="medium", solution="#!/bin/bash\ncd /app/repo\ngit tag -a v1.0 -m x\n")
    return root


def run(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_solution_commands_keep_heredocs_and_multiline_strings_whole():
    script = ("#!/bin/bash\nset -euo pipefail\n# comment\ncd /app\ncat > f <<'EOF'\na\nb\nEOF\n"
              "awk '{\n  print $1\n}' f > g\n{\n  echo x\n} > h\nmake \\\n  all\n")
    assert solution_commands(script) == ["cd /app", "cat > f <<'EOF'\na\nb\nEOF", "awk '{\n  print $1\n}' f > g",
                                         "{\n  echo x\n} > h", "make \\\n  all"]


def test_synth_build_and_curate(tasks_dir, tmp_path):
    rollouts = tmp_path / "rollouts.jsonl"
    out = json.loads(run("datasets", "synth", "--tasks", str(tasks_dir), "--n", "480", "--seed", "3",
                         "--out", str(rollouts)))
    assert out == {"out": str(rollouts), "rollouts": 480, "tasks": 3}
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert len(rows) == 480 and len({r["training_step"] for r in rows}) == 30  # 2 groups x 8 per step
    groups = defaultdict(list)
    for r in rows:
        groups[(r["training_step"], r["task_id"])].append(r)
        expected = 0.05 * r["format_reward"] + 0.10 * r["script_reward"] + 0.85 * r["verifier_reward"]
        assert r["reward"] == pytest.approx(expected, abs=1e-5)  # docs/design.md#single-turn-reward
    for g in groups.values():
        assert len(g) == 8
        mean = sum(r["reward"] for r in g) / 8
        std = math.sqrt(sum((r["reward"] - mean) ** 2 for r in g) / 8)
        assert all(r["step_reward_std"] == pytest.approx(std, abs=1e-5) for r in g)
    kinds = {json.loads(r["completion"]).get("analysis", "")[:7] if r["format_reward"] else "invalid" for r in rows}
    assert "invalid" in kinds and len(kinds) > 1
    run("datasets", "synth", "--tasks", str(tasks_dir), "--n", "480", "--seed", "3", "--out", str(tmp_path / "b.jsonl"))
    assert (tmp_path / "b.jsonl").read_text() == rollouts.read_text()  # seeded

    ds = tmp_path / "datasets"
    params = tmp_path / "params.yaml"  # the knobs come from params sections, as in the `datasets` stage
    params.write_text("datasets: {prm_pairs: 5}\n")
    line = run("datasets", "build", "--rollouts", str(rollouts), "--tasks", str(tasks_dir), "--out", str(ds),
               "--no-progress", "--params", str(params))
    assert "judge rules/1" in line
    summary = json.loads((ds / "summary.json").read_text())
    assert sorted(p.name for p in ds.iterdir()) == sorted(
        [*OUTPUT_FILES, "dpo_filtered.removed.jsonl", "summary.json"])
    assert summary["counts"]["sft.jsonl"] == 3 and summary["counts"]["prm_sequence.jsonl"] == 5
    assert summary["counts"]["dpo.jsonl"] > 0 and summary["removed_reasons"].get("chosen_fabricates", 0) > 0
    assert summary["judge"] == "rules/1" and summary["unknown_tasks"] == []
    # the synthetic hacks forge provided inputs; none survives the filter
    for line_ in (ds / "dpo_filtered.jsonl").read_text().splitlines():
        assert "> /app/in.txt" not in json.loads(line_)["chosen"]

    cur = tmp_path / "curated"
    summary = json.loads(run("curate", "--rollouts", str(rollouts), "--tasks", str(tasks_dir), "--out", str(cur),
                             "--eval-ids", "git-tagging", "--params", str(params)))
    assert summary["eval"] == 1 and summary["candidates"] == 2
    curated = json.loads((cur / "rl_tasks_mt.json").read_text())
    assert curated["task_ids"] == ["count-lines"]
    analysis = {a["task_id"]: a for a in json.loads((cur / "task_analysis.json").read_text())["tasks"]}
    assert set(analysis) == {"count-lines", "make-report"} and analysis["make-report"]["difficulty"] == "hard"
    assert analysis["make-report"]["decision"] == "dropped:quality 6 < 7"  # a terse instruction
    assert analysis["count-lines"]["decision"] == "selected:sample"
    histogram = json.loads((cur / "skill_histogram.json").read_text())
    assert len(histogram) == 16 and {"skill", "before", "after"} == set(histogram[0])
    assert (cur / "skill_histogram.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((cur / "contamination.json").read_text())["n_eval"] == 1
