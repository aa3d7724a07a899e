"""Every reference to the repository's documentation resolves: each `docs/NAME.md` named in
code, SQL, templates or docs exists, and each `docs/NAME.md, "Section"` names a heading of
that file (a heading whose text starts with the section's name)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("*.py", "*.sql", "*.html", "*.md", "*.yml", "Makefile", "Dockerfile")
SKIP = {".venv", ".git", "var", "build", ".hypothesis", ".pytest_cache"}
# docs/X.md, "Section"  |  `docs/X.md`, "Section"  |  docs/X.md ("Section")
REFERENCE = re.compile(r"docs/([A-Za-z0-9_-]+\.md)`?(?:,\s*|\s*\(\s*)?(?:\"([^\"\n]+)\")?")
HEADING = re.compile(r"^#+\s+(.*?)\s*$", re.MULTILINE)


def _sources() -> list[Path]:
    return [
        p
        for pattern in SOURCES
        for p in ROOT.rglob(pattern)
        if not SKIP & set(p.relative_to(ROOT).parts)
    ]


def _references() -> list[tuple[Path, str, str | None]]:
    return [
        (path, doc, section)
        for path in _sources()
        if path != Path(__file__).resolve()  # its own examples
        for doc, section in REFERENCE.findall(path.read_text(encoding="utf-8"))
    ]


def test_there_are_references_to_check() -> None:
    refs = _references()
    assert len(refs) > 20
    assert any(section for _, _, section in refs)


def test_every_docs_reference_names_a_file_and_a_heading_that_exist() -> None:
    broken = []
    for path, doc, section in _references():
        target = ROOT / "docs" / doc
        if not target.is_file():
            broken.append(f"{path.relative_to(ROOT)}: docs/{doc} does not exist")
            continue
        if section is None:
            continue
        headings = HEADING.findall(target.read_text(encoding="utf-8"))
        if not any(h.startswith(section) for h in headings):
            broken.append(f"{path.relative_to(ROOT)}: docs/{doc} has no section {section!r}")
    assert broken == []
