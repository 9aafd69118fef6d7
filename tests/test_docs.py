"""The README stays a five-minute read and every documentation link leads somewhere.

- README.md is at most 12,000 bytes (issue 30: everything else lives in docs/).
- Every relative Markdown link in README.md and docs/*.md names a file or folder of the repository, and a
  `#fragment` names a heading of the linked Markdown file (GitHub's anchor rules).
- README.md names no path outside the repository, and the DVC remote it names is the one `.dvc/config` sets.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_MAX_BYTES = 12_000

# [text](target) and [text](target "title"); images too. Code spans and fenced blocks are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    return CODE_SPAN.sub("", FENCE.sub("", text))


def github_anchor(heading: str) -> str:
    """GitHub's id for a Markdown heading: lower case, punctuation dropped (hyphens and underscores kept),
    spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.MULTILINE)}


def relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(path.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path):
    broken = []
    for target in relative_links(doc):
        file_part, _, fragment = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists() or ROOT not in (dest, *dest.parents):
            broken.append(f"{target} (no such file in the repository)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no heading #{fragment} in {dest.relative_to(ROOT)})")
    assert not broken, f"{doc.relative_to(ROOT)}: broken links: {broken}"


def test_readme_is_short():
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes, the limit is {README_MAX_BYTES}: move detail to docs/"


def test_readme_names_no_path_outside_the_repository():
    text = README.read_text()
    outside = re.findall(r"(?:\.\./shared\S*|/work/\S*|\.\./\.\.\S*)", text)
    assert not outside, f"README.md names paths outside the repository: {outside}"


def test_readme_names_the_configured_dvc_remote():
    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    default = config["core"]["remote"]
    # DVC writes the section as ['remote "name"'] (quotes and all)
    sections = {name.strip("'"): name for name in config.sections()}
    url = config[sections[f'remote "{default}"']]["url"]
    text = README.read_text()
    assert f"`{default}`" in text and f"url = {url}" in text, (
        f"README.md must name the DVC remote of .dvc/config: {default} with url = {url}")
