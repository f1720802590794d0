"""parl.testing from outside: ``import parl`` leaves it (and pytest) alone, and an algorithm or a placement
written in a file outside the repository joins its contract in a few lines of its own test file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SARSA = REPO / "examples" / "write_your_own" / "expected_sarsa.py"
PERFORMANCE_DOC = REPO / "docs" / "performance.md"


def _python(code: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_parl_loads_neither_parl_testing_nor_pytest_and_parl_testing_needs_no_pytest(tmp_path) -> None:
    check = "import sys; {}; print(sorted(m for m in ('parl.testing', 'pytest') if m in sys.modules))"
    assert _python(check.format("import parl"), tmp_path) == "[]"
    assert _python(check.format("import parl.testing"), tmp_path) == "['parl.testing']"
    loaded = "import parl.testing; parl.testing.PlacementContract"
    assert _python(check.format(loaded), tmp_path) == "['parl.testing', 'pytest']"


def _pytest(test_dir: Path, test_file: str, passes: bool = True) -> str:
    """pytest's verbose output of ``test_file`` run in ``test_dir`` (outside the repository), which must
    pass (or, with ``passes=False``, fail)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(test_dir), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", test_file],
        capture_output=True,
        text=True,
        cwd=test_dir,
        env=env,
        timeout=600,
    )
    assert (done.returncode == 0) == passes, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


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
    out = _pytest(tmp_path, "test_mine.py")
    assert "14 passed" in out, out[-2000:]


def test_a_placement_in_a_file_outside_the_repository_joins_the_contract_in_a_few_lines(tmp_path) -> None:
    # The user's own placement, outside parl: the example of docs/performance.md, as it stands there.
    blocks = re.findall(r"```python\n(.*?)```", PERFORMANCE_DOC.read_text(), re.S)
    (example,) = [block for block in blocks if 'registry.register("counted-threads"' in block]
    (tmp_path / "counted_threads.py").write_text(example)
    test_file = textwrap.dedent(
        """\
        import counted_threads
        from parl.testing import PlacementCase, PlacementContract

        class TestCountedThreads(PlacementContract):
            cases = [PlacementCase("counted-threads")]

        def test_the_contract_ran_the_placement():
            assert counted_threads.CountingRunner.started > 10
        """
    )
    assert len(test_file.splitlines()) < 10
    (tmp_path / "test_mine.py").write_text(test_file)
    out = _pytest(tmp_path, "test_mine.py")
    # The 26 contract runs of one placement (20 tests, some parametrized) over its case only, and the check.
    passed = re.findall(r"^test_mine.py::(\S+) PASSED", out, re.M)
    contract = [test for test in passed if test.startswith("TestCountedThreads::")]
    assert len(contract) == 26 and all("[counted-threads" in test for test in contract), out[-3000:]
    assert passed[-1] == "test_the_contract_ran_the_placement" and "27 passed" in out, out[-2000:]


def test_a_case_whose_fixture_is_missing_says_how_to_get_it(tmp_path) -> None:
    test_file = textwrap.dedent(
        """\
        from parl.testing import PlacementCase, PlacementContract

        class TestOnACluster(PlacementContract):
            cases = [PlacementCase("threads", fixtures=("ray_cluster",))]
        """
    )
    (tmp_path / "test_cluster.py").write_text(test_file)
    out = _pytest(tmp_path, "test_cluster.py", passes=False)
    needs = "placement case 'threads' needs the fixture 'ray_cluster': add `from parl.testing import ray_cluster`"
    assert needs in out and "26 error" in out, out[-3000:]
