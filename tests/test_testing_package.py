"""parl.testing from outside: ``import parl`` leaves it (and pytest) alone, and an algorithm written in a
file outside the repository joins the contract in a few lines of its own test file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SARSA = REPO / "examples" / "write_your_own" / "expected_sarsa.py"


def _python(code: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_parl_loads_neither_parl_testing_nor_pytest_and_parl_testing_needs_no_pytest(tmp_path) -> None:
    check = "import sys; {}; print(sorted(m for m in ('parl.testing', 'pytest') if m in sys.modules))"
    assert _python(check.format("import parl"), tmp_path) == "[]"
    assert _python(check.format("import parl.testing"), tmp_path) == "['parl.testing']"


def test_an_algorithm_in_a_file_outside_the_repository_joins_the_contract_in_a_few_lines(tmp_path) -> None:
    (tmp_path / "expected_sarsa.py").write_text(SARSA.read_text())  # the user's own algorithm, outside parl
    test_file = textwrap.dedent(
        """\
        from expected_sarsa import ExpectedSarsa
        from parl.models import MLPQModel
        from parl.testing import AlgorithmCase, AlgorithmContract

        class TestExpectedSarsa(AlgorithmContract):
            cases = [AlgorithmCase("ExpectedSarsa", ExpectedSarsa, MLPQModel, {"obs_dim": 4, "num_actions": 2})]
        """
    )
    assert len(test_file.splitlines()) < 10
    (tmp_path / "test_mine.py").write_text(test_file)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "14 passed" in done.stdout, done.stdout[-2000:]
