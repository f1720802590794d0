"""benchmarks/compare.py without training: how rows reach the runners, medians to a threshold, the doc section."""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
import types
from pathlib import Path
from typing import Dict, Optional

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
compare = importlib.import_module("compare")
report = importlib.import_module("compare_report")
rows = importlib.import_module("compare_rows")
parl_runner = importlib.import_module("parl_runner")

ROW = rows.Row("toy", "CartPole-v1", 475.0, "DQN", "examples/toy.py", sb3_algo="dqn", sb3_env="CartPole-v1")


def run(steps: float, seconds: float, check: float, final: Optional[float] = None, reached=None) -> "report.Run":
    result = {"greedy_check": check, "env_steps": steps, "train_seconds": seconds}
    result.update(greedy_mean_return=check if final is None else final, cpu_seconds=seconds, budget=1_000)
    if reached is not None:
        result["reached"] = reached
    return report.Run(ROW, report.PARL, 0, result=result)


def test_medians_are_over_the_seeds_that_reached_and_finals_are_counted_among_them():
    two_of_three = report.Side(runs=[run(100, 1.0, 500), run(900, 9.0, 300), run(300, 3.0, 480, final=470)])
    assert two_of_three.cells() == ["2/3", "1/2", "200", "2.0"]
    one_of_four = report.Side(runs=[run(100, 1.0, 500), run(900, 9.0, 300), run(50, 0.5, 470), run(70, 0.7, 10)])
    assert one_of_four.cells() == ["1/4", "1/1", "100", "1.0"]
    failed = report.Side(runs=[report.Run(ROW, report.PARL, 0, error="boom")])
    assert failed.cells() == ["0/1", "0/0", "not reached", "not reached"]
    assert report.Side(status="missing").cells() == ["missing", "", "", ""]
    table = report.runs_table([run(100, 1.0, 500), report.Run(ROW, report.SB3, 1, error="boom")]).splitlines()
    assert table[2] == "| toy (parl) | 0 | yes (last check 500.0) | 100 | 1.0 | 1.0 | 500.0 | 1,000 |"
    assert table[3].startswith("| toy (SB3) | 1 | error: boom |")
    assert {line.count("|") for line in table} == {9}


def test_a_run_reached_only_when_its_runner_says_its_check_was_confirmed():
    # A last check above the threshold whose confirmation failed is not reached; a runner's word wins.
    assert not run(100, 1.0, 490, reached=False).reached
    assert run(100, 1.0, 490, reached=True).reached
    assert run(100, 1.0, 490).reached and not run(100, 1.0, 400).reached  # results without the key
    summary = report.summary_table(
        [ROW], {"toy": {report.PARL: report.Side(runs=[run(1, 1.0, 500)]), report.SB3: report.Side(status="not run")}}
    )
    header, _, line = summary.splitlines()
    assert header.count("|") == line.count("|") == 13


def test_write_section_appends_once_then_replaces_only_between_the_markers(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nkept\n")
    report.write_section(doc, f"{report.BEGIN}\nfirst\n{report.END}")
    doc.write_text(doc.read_text() + "\n## after\n")
    report.write_section(doc, f"{report.BEGIN}\nsecond\n{report.END}")
    text = doc.read_text()
    assert text == f"# Benchmarks\n\nkept\n\n{report.BEGIN}\nsecond\n{report.END}\n\n## after\n"
    doc.write_text(f"{report.END}\n{report.BEGIN}\n")
    with pytest.raises(ValueError, match="compare:begin"):
        report.write_section(doc, "x")


def fake_example(check_interval_field: bool) -> types.ModuleType:
    """A module shaped like an example: ``Settings`` and ``train``, which records its arguments."""
    fields = [("model", str, "mlp")] + ([("check_interval", int, 1_000)] if check_interval_field else [])
    module = types.ModuleType("toy_example")
    module.Settings = dataclasses.make_dataclass("Settings", fields)

    def train(
        seed: int = 0, max_steps: int = 10, target: float = 1.0, settings: Optional[object] = None, verbose: bool = True
    ) -> Dict[str, object]:
        return {}

    module.train = train
    return module


def test_parl_runner_places_target_options_and_check_interval():
    module = fake_example(check_interval_field=True)
    kwargs = parl_runner.train_arguments(module, 3, 400.0, 500, {"model": "lstm", "max_steps": 7})
    assert kwargs == {
        "seed": 3,
        "verbose": False,
        "target": 400.0,
        "max_steps": 7,
        "settings": module.Settings(model="lstm", check_interval=500),
    }
    assert parl_runner.parse_option("model=lstm") == ("model", "lstm")
    assert parl_runner.parse_option("lr=0.5") == ("lr", 0.5)


def test_parl_runner_rejects_what_the_example_cannot_take():
    with pytest.raises(ValueError, match="no_such_option"):
        parl_runner.train_arguments(fake_example(True), 0, None, None, {"no_such_option": 1})
    without_field = fake_example(check_interval_field=False)
    assert "settings" not in parl_runner.train_arguments(without_field, 0, None, 1_000, {})  # train_until's default
    with pytest.raises(ValueError, match="check_interval"):
        parl_runner.train_arguments(without_field, 0, None, 500, {})
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parl_runner.parse_option("lstm")


def test_both_sides_get_the_same_target_and_check_interval():
    parl_command = compare.parl_command(ROW, 2)
    sb3_command = compare.sb3_command(ROW, 2, "zoo", 1)
    for command in (parl_command, sb3_command):
        assert command[command.index("--target") + 1] == "475.0"
        assert command[command.index("--check-interval") + 1] == str(compare.CHECK_INTERVAL)
        assert command[command.index("--seed") + 1] == "2"


def test_options_reach_parl_runs_after_the_rows_own():
    row = dataclasses.replace(ROW, options=("model=lstm",))
    command = compare.parl_command(row, 0, compare.parse_args(["--option", "tau=1.0", "--option", "lr=2"]).option)
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--option"]
    assert pairs == ["model=lstm", "tau=1.0", "lr=2"]
    assert compare.parse_args([]).option == [] and compare.parse_args([]).seeds == list(range(10))


def test_rows_have_unique_names_and_say_why_sb3_is_absent():
    names = [row.name for row in rows.ROWS]
    assert len(set(names)) == len(names)
    for row in rows.ROWS:
        assert (row.sb3_algo is None) == bool(row.sb3_absent), row.name
        assert row.example.startswith("examples/") and row.example.endswith(".py")
        assert math.isfinite(row.threshold)


def test_a_missing_example_and_an_absent_sb3_counterpart_run_nothing():
    missing = rows.Row("toy", "CartPole-v1", 475.0, "REINFORCE", "examples/no_such_example.py", sb3_absent="none")
    args = compare.parse_args(["--seeds", "0", "1"])
    loads = []
    sides, runs = compare.measure([missing], args, loads)
    assert runs == [] and loads == []
    assert sides["toy"][report.PARL].cells() == ["missing", "", "", ""]
    assert sides["toy"][report.SB3].cells() == ["n/a (none)", "", "", ""]
