"""The design the code relies on lives in docs/ (docs/design.md): every `docs/<page>.md#anchor` that a source,
params or Markdown file names is a heading of that page, and nothing points at a design document outside the
repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")
OUTSIDE = re.compile(r"DESIGN(?:\.md| §)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchors(page: Path) -> set[str]:
    """GitHub's ids of a Markdown page's headings (as tests/test_docs.py computes them)."""
    headings = re.findall(r"^#{1,6}\s+(.*)$", FENCE.sub("", page.read_text()), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", re.sub(r"[`*]", "", h.strip()).lower()).replace(" ", "-") for h in headings}


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in out.stdout.splitlines() if (ROOT / line).is_file()]


SOURCES = tracked("*.py", "*.yaml", "*.md")


def test_every_design_anchor_the_code_names_exists():
    assert any(REFERENCE.search(p.read_text()) for p in SOURCES)  # the check below has something to check
    broken = [f"{p.relative_to(ROOT)}: docs/{page}#{anchor}"
              for p in SOURCES for page, anchor in REFERENCE.findall(p.read_text())
              if not (ROOT / "docs" / page).is_file() or anchor not in anchors(ROOT / "docs" / page)]
    assert broken == []


def test_nothing_points_at_a_design_document_outside_the_repository():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in SOURCES if p.name != Path(__file__).name
             for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert found == []
