"""The docs cite nothing a reader does not have: no "SPEC", no "§", no "issue N".

The contract and the issue tracker are the maintainers' documents; a page says the rule it
relies on, or links the page that does.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PRIVATE = re.compile(r"\bSPEC\b|§|\bissues?\s*#?\d+", re.I)


def private_references(root: Path) -> list[str]:
    """``path:line: text`` for every line of ``docs/`` and ``README.md`` citing one."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), start=1):
            if _PRIVATE.search(line):
                found.append(f"{page.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_page_cites_the_spec_or_an_issue():
    assert private_references(ROOT) == []


def test_the_scan_finds_what_it_looks_for(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Fine.\nAs SPEC §4.2 says.\n")
    (tmp_path / "docs" / "a.md").write_text("The targets of issue 5.\nissues #12 too\nspecial\n")
    assert private_references(tmp_path) == [
        "README.md:2: As SPEC §4.2 says.",
        "docs/a.md:1: The targets of issue 5.",
        "docs/a.md:2: issues #12 too",
    ]
