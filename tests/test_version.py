"""One version: ``parl.__version__``, what setup.py installs (read without importing parl, so without
paddle) and the newest version heading of CHANGELOG.md agree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import parl

REPO = Path(__file__).resolve().parents[1]
#: ``## 0.2.0`` or ``## 0.2.0 (unreleased)``: a version heading of CHANGELOG.md.
HEADING = re.compile(r"^## (\d+\.\d+\.\d+)(?: \(unreleased\))?$", flags=re.M)


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", parl.__version__), parl.__version__


def test_setup_py_installs_parl_s_version_without_importing_parl() -> None:
    code = (
        "import runpy, sys; sys.argv = ['setup.py', '--version']; runpy.run_path('setup.py', run_name='__main__'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('parl', 'paddle')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    version, imported = out.stdout.strip().splitlines()[-2:]
    assert version == parl.__version__
    assert imported == "[]"


def test_the_newest_changelog_heading_is_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = HEADING.findall(changelog)
    assert headings, "CHANGELOG.md has no version heading such as '## 0.2.0 (unreleased)'"
    assert headings[0] == parl.__version__
    first_section = changelog.index("\n## ")
    assert changelog[first_section:].startswith(f"\n## {headings[0]}"), "the newest section is the version's"
