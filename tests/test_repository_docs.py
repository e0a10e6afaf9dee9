"""The documents hold together: every relative link in the README, docs/, CHANGELOG.md, benchmarks/ and
datasets/ names a file that exists and, with ``#anchor``, an anchor that file defines (an ``<a id>`` or a
heading); every ``benchmarks/RESULTS.md`` section the README and docs/ cite by name exists; the results
file stays short, its sections well formed; every run folder under ``benchmarks/runs/`` has a manifest that
lists its files, and no test reads a run folder (fixtures live in ``tests/data/``). Text only, no torch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
RUNS = REPO / "benchmarks" / "runs"

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ANCHOR_TAG = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# "RESULTS.md `zoo`", "RESULTS.md, `compile_cost`", "RESULTS.md, rep_consistency": a section cited by name
CITATION = re.compile(r"RESULTS\.md[,:]?\s+(?:`([\w-]+)`|([a-z0-9]+_[\w-]+))")
SECTION = re.compile(r"<!-- (BEGIN|END) ([\w-]+) -->$", re.M)


def documents() -> list[Path]:
    docs = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "benchmarks").rglob("*.md")), *sorted((REPO / "datasets").rglob("README.md"))]
    return [d for d in docs if d.is_file()]


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (indented blocks are commands: no links in them)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found = set()
    for line in prose_lines(path):
        found.update(ANCHOR_TAG.findall(line))
        match = HEADING.match(line)
        if match:
            found.add(slug(match.group(1)))
    return found


def section_names() -> set[str]:
    return {name for kind, name in SECTION.findall(RESULTS.read_text(encoding="utf-8")) if kind == "BEGIN"}


def test_every_relative_link_names_a_file_and_an_anchor_that_exist():
    cache: dict[Path, set[str]] = {}
    broken = []
    for doc in documents():
        for number, line in enumerate(prose_lines(doc), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                path_part, _, anchor = target.partition("#")
                path = (doc.parent / path_part).resolve() if path_part else doc
                if not path.exists():
                    broken.append(f"{doc.relative_to(REPO)}: {target}: no such file")
                elif anchor and path.suffix == ".md":
                    if anchor not in cache.setdefault(path, anchors(path)):
                        broken.append(f"{doc.relative_to(REPO)}: {target}: no anchor #{anchor} in "
                                      f"{path.relative_to(REPO)}")
    assert broken == []


def test_every_results_section_the_readme_and_docs_cite_by_name_exists():
    names = section_names()
    missing = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for line in prose_lines(doc):
            for quoted, bare in CITATION.findall(line):
                name = quoted or bare
                if name not in names:
                    missing.append(f"{doc.relative_to(REPO)}: RESULTS.md {name}")
    assert missing == []


def test_the_results_file_is_short_and_its_sections_well_formed():
    text = RESULTS.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 600
    markers = SECTION.findall(text)
    begins = [name for kind, name in markers if kind == "BEGIN"]
    assert len(begins) == len(set(begins)), "a section appears twice"
    # each section: an anchor of its name, BEGIN, then its own END before the next BEGIN
    assert [name for kind, name in markers] == [name for name in begins for _ in range(2)]
    assert [kind for kind, _ in markers] == ["BEGIN", "END"] * len(begins)
    for name in begins:
        assert f'<a id="{name}"></a> <!-- BEGIN {name} -->' in text, name
    assert "Earlier runs" not in text


@pytest.mark.parametrize("folder", sorted(p.name for p in RUNS.iterdir() if p.is_dir()) if RUNS.is_dir() else [])
def test_every_run_folder_has_a_manifest_naming_each_of_its_files(folder):
    manifest = RUNS / folder / "MANIFEST.md"
    assert manifest.is_file()
    text = manifest.read_text(encoding="utf-8")
    files = [p for p in (RUNS / folder).rglob("*") if p.is_file() and p.name != "MANIFEST.md"]
    unnamed = []
    for path in files:
        relative = path.relative_to(RUNS / folder).as_posix()
        # a folder of many files (logs/) is named once, as the folder
        if f"`{relative}`" not in text and f"`{relative.split('/')[0]}/`" not in text:
            unnamed.append(relative)
    assert unnamed == []


def test_no_test_reads_a_run_folder():
    """Run outputs under benchmarks/runs/ may be pruned as later runs replace them: tests read
    tests/data/."""
    pattern = re.compile(r"benchmarks[\"']?\s*[,/]\s*[\"']?runs\b")
    readers = [p.name for p in sorted(Path(__file__).parent.glob("*.py"))
               if p.name != Path(__file__).name and pattern.search(p.read_text(encoding="utf-8"))]
    assert readers == []
