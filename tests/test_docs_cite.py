"""The docs cite only what is in the repository: every repository path named in README.md, docs/ and
the example configs exists, and so does every relative link target."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parents[1]
#: A path into the repository's folders, as the docs write them (``parl/experiment/train/trainer.py``).
CITED_PATH = re.compile(r"(?<![\w/.-])((?:parl|tests|examples|docs|benchmarks)/[\w/.-]*\.(?:py|md|yaml|txt|c))")
#: A markdown link ``[text](target)`` to a file, not to a site or an anchor of the same page.
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def documents() -> List[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "examples").rglob("*.yaml"))]


def missing_citations() -> List[Tuple[str, str]]:
    missing = []
    for document in documents():
        text = document.read_text(encoding="utf-8")
        for cited in CITED_PATH.findall(text):
            if not (REPO / cited).exists():
                missing.append((str(document.relative_to(REPO)), cited))
        for target in LINK.findall(text):
            if "://" not in target and not (document.parent / target).exists():
                missing.append((str(document.relative_to(REPO)), target))
    return missing


def test_every_cited_path_and_link_exists() -> None:
    assert missing_citations() == []


def test_the_check_finds_a_missing_file(tmp_path, monkeypatch) -> None:
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("See docs/nothing.md and [the design](DESIGN.md); parl/__init__.py is real.\n")
    (tmp_path / "parl").mkdir()
    (tmp_path / "parl" / "__init__.py").write_text("")
    (tmp_path / "README.md").write_text("[docs](docs/page.md)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert missing_citations() == [("docs/page.md", "docs/nothing.md"), ("docs/page.md", "DESIGN.md")]
