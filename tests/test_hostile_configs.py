"""Configs that cannot hurt: YAML bombs, absurd sizes, non-finite numbers and broken parts are each refused
on one line naming the key, fast, and ``parl train`` exits with status 2."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from test_config import VALID, changed, error_of, write

from parl.experiment.cli.commands import main
from parl.experiment.config.build import make_agent
from parl.experiment.config.robot_config import MAX_AGENTS, MAX_BATCH, MAX_SEED, MAX_WORKERS, ConfigError, load_config
from parl.experiment.config.yaml_loading import MAX_BYTES, MAX_DEPTH, MAX_VALUES, read_config_file
from parl.layers.fc import MAX_SIZE
from parl.runtime.processes.options import MAX_WORKERS as MAX_PROCESSES

#: Nine lists of nine aliases of the one before: 9**10 values once expanded, in about a kilobyte.
BOMB = "  kwargs:\n    a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


def refused_fast(path: str, overrides: tuple = ()) -> str:
    """The one-line error of loading ``path``, which must come in under a second (it takes milliseconds)."""
    start = time.perf_counter()
    message = error_of(path, overrides)
    assert time.perf_counter() - start < 1.0, message
    return message


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    text = VALID.replace("  id: CartPole-v1\n", "  id: CartPole-v1\n" + BOMB)
    assert len(text) - len(VALID) < 1400
    path = write(tmp_path, text)
    assert refused_fast(path) == f"env.kwargs.a5[1]: aliases expand to more than {MAX_VALUES} values ({path}:11)"


def test_an_alias_bomb_in_an_override_is_refused(tmp_path: Path) -> None:
    bomb = "{a: &a [x, x, x, x, x, x, x, x, x, x], b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], "
    bomb += "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], "
    bomb += "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}"
    message = refused_fast(write(tmp_path, VALID), (f"env.kwargs={bomb}",))
    assert message == f"env.kwargs.e[9]: aliases expand to more than {MAX_VALUES} values (-o env.kwargs:1)"


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("  id: CartPole-v1\n", "  id: CartPole-v1\n  kwargs:\n    x: &a [1, *a]\n"))
    assert refused_fast(path) == f"env.kwargs.x[1]: alias *a refers to a mapping or list that holds it ({path}:6)"


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    deep = "[" * 3000 + "]" * 3000
    path = write(tmp_path, VALID.replace("  id: CartPole-v1\n", f"  id: CartPole-v1\n  kwargs:\n    x: {deep}\n"))
    message = refused_fast(path)
    assert (
        message
        == f"env.kwargs.x{'[0]' * (MAX_DEPTH - 3)}: nested deeper than {MAX_DEPTH} mappings and lists ({path}:6)"
    )
    deepest = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # inside the file's own mapping
    nested: list = []
    for _ in range(MAX_DEPTH - 2):
        nested = [nested]
    assert read_config_file(write(tmp_path, f"x: {deepest}\n", "deepest.yaml")) == {"x": nested}


def test_sizes_are_bounded_by_the_machine(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    assert refused_fast(path, ("agents=1000000000000",)) == (
        f"agents: expected an integer in [1, {MAX_AGENTS}], got 1000000000000"
    )
    assert (
        refused_fast(path, ("workers=5000",)) == f"workers: expected an integer in [1, {MAX_WORKERS}] or null, got 5000"
    )
    assert refused_fast(path, ("placement.name=processes", "placement.workers=5000")) == (
        f"placement.workers: expected an integer in [1, {MAX_PROCESSES}], got 5000"
    )
    assert refused_fast(path, ("seed=100000000000000000000",)) == (
        f"seed: expected an integer in [0, {MAX_SEED}], got 100000000000000000000"
    )
    assert refused_fast(path, ("tasks.RL.batching.max_batchsize=1000000000",)) == (
        f"tasks.RL.batching.max_batchsize: expected an integer in [1, {MAX_BATCH}] or 'agents', got 1000000000"
    )
    assert 1 <= MAX_AGENTS <= 999 and MAX_WORKERS >= 4 and MAX_SEED == 2**32 - 1
    assert load_config(path, [f"seed={MAX_SEED}"]).seed == MAX_SEED


def test_a_huge_network_width_is_refused(tmp_path: Path) -> None:
    message = refused_fast(write(tmp_path, VALID), ("tasks.RL.model.hidden_sizes=[1000000000]",))
    assert message == f"tasks.RL.model: fc size must be an integer in [1, {MAX_SIZE}], got 1000000000"


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "tasks.RL.algorithm.learning_rate=.inf",
            "tasks.RL.algorithm.learning_rate: expected a finite number, got inf",
        ),
        ("train.target_return=.nan", "train.target_return: expected a finite number, got nan"),
        (
            "tasks.RL.batching.training_timeout=.inf",
            "tasks.RL.batching.training_timeout: expected a finite number, got inf",
        ),
    ],
)
def test_non_finite_numbers_are_refused(tmp_path: Path, override: str, expected: str) -> None:
    assert refused_fast(write(tmp_path, VALID), (override,)) == expected


def test_a_log_dir_at_or_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    for log_dir in (tmp_path / "a_file", tmp_path / "a_file" / "run"):
        message = refused_fast(write(tmp_path, changed({"log_dir": str(log_dir)})))
        assert message == f"log_dir: not writable: {str(tmp_path / 'a_file')!r} is a file, not a directory"


PARTS = """
from parl.utils import GymAgent


def not_an_env(**kwargs):
    return 42


class BrokenAgent(GymAgent):
    def __init__(self, env, *, seed: int = 0) -> None:
        raise RuntimeError("no arms")
"""


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dict[str, Any]]:
    """The valid config with ``python_path`` on a module of broken parts; ``sys.path`` restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "broken_parts", raising=False)
    (tmp_path / "broken_parts.py").write_text(textwrap.dedent(PARTS))
    yield changed({"python_path": ["."], "log_dir": str(tmp_path / "run")})
    sys.modules.pop("broken_parts", None)


def test_an_env_factory_returning_no_environment_is_refused(tmp_path: Path, parts: Dict[str, Any]) -> None:
    parts["env"] = {"factory": "broken_parts.not_an_env"}
    assert refused_fast(write(tmp_path, parts)) == "env.factory: expected an environment (with spaces), got 42"


def test_an_agent_failing_in_its_constructor_is_one_line_and_exit_status_2(
    tmp_path: Path, parts: Dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    parts["agent"] = {"class": "broken_parts.BrokenAgent"}
    path = write(tmp_path, parts)
    with pytest.raises(ConfigError, match=r"^agent: RuntimeError: no arms$"):
        make_agent(load_config(path), 0)
    assert main(["train", path, "--quiet"]) == 2
    assert capsys.readouterr().err == "parl train: agent: RuntimeError: no arms\n"


def test_unreadable_files_are_one_line_and_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(VALID.encode() + "name: café\n".encode("latin-1"))
    assert refused_fast(str(latin)) == f"{latin}: not UTF-8 text (invalid continuation byte at byte {len(VALID) + 9})"
    huge = tmp_path / "huge.yaml"
    huge.write_text(VALID + "#" * MAX_BYTES)
    assert refused_fast(str(huge)) == f"{huge}: larger than {MAX_BYTES} bytes; no config is"
    assert main(["train", str(latin), "--quiet"]) == 2
    assert capsys.readouterr().err == f"parl train: {refused_fast(str(latin))}\n"
