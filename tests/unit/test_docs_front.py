"""#29.6: the README is a front door (short, readable lines, the two commands first), ARCHITECTURE.md
exists and walks the three paths with a glossary, and no relative link in the docs leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
LINKED = [README, ARCHITECTURE, *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for line in FENCE.sub("", markdown).splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            text = heading.group(1).strip().lower().replace("`", "")
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def links(markdown: str) -> list[str]:
    # Code blocks and spans hold example text, not links.
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", markdown)))


def test_readme_is_at_most_250_lines_of_at_most_300_characters() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    long = [(n, len(line)) for n, line in enumerate(lines, 1) if len(line) > 300]
    assert not long, f"README.md lines over 300 characters (line, length): {long}"


def test_the_two_commands_are_the_readmes_first_code_block() -> None:
    first = FENCE.search(README.read_text())
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(0).splitlines()[1:-1]]
    assert commands == ["make demo", "make test"]


def test_architecture_names_the_three_paths_state_and_a_glossary() -> None:
    text = ARCHITECTURE.read_text()
    headings = anchors(text)
    for path in ("path-1-a-pending-pod", "path-2-a-spot-interruption-warning", "path-3-a-consolidation",
                 "where-state-lives", "glossary"):
        assert path in headings, f"ARCHITECTURE.md has no section {path}"
    glossary = text.split("## Glossary", 1)[1]
    for term in ("world", "pass", "claim", "in flight", "slice", "lease"):
        assert f"**{term}**" in glossary, f"the glossary does not define {term}"


@pytest.mark.parametrize("doc", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(doc: Path) -> None:
    broken = []
    for target in links(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto: and the like are not this repository's
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(f"{target}: no such heading in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


def test_anchors_follow_githubs_rules() -> None:
    """The checker above is only as good as its anchors: check them on headings the docs really use."""
    assert anchors("## What a node's price counts\n## The local environment: sim/\n") == {
        "what-a-nodes-price-counts", "the-local-environment-sim"}
    assert "at-scale-beside-karpenters-published-figures" in anchors(
        "### At scale, beside Karpenter's published figures\n")
