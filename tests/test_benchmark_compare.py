"""benchmarks/compare.py without training: how rows reach the runners, medians to a threshold, the doc section."""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from pathlib import Path
from typing import Optional

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
compare = importlib.import_module("compare")
report = importlib.import_module("compare_report")
rows = importlib.import_module("compare_rows")
parl_runner = importlib.import_module("parl_runner")

ROW = rows.Row("toy", "CartPole-v1", 475.0, "DQN", "examples/configs/toy.yaml", sb3_algo="dqn", sb3_env="CartPole-v1")


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


def test_parl_runner_turns_its_options_into_config_overrides_after_its_own():
    overrides = parl_runner.run_overrides(3, 400.0, 500, ["tasks.RL.model.class=parl.models.MLPActorCritic"], "/tmp/x")
    assert overrides == [
        "seed=3",
        "log_dir=/tmp/x",
        "train.target_return=400.0",
        "evaluation.every_steps=500",
        "tasks.RL.model.class=parl.models.MLPActorCritic",
    ]
    assert parl_runner.run_overrides(0, None, None, [], "d") == ["seed=0", "log_dir=d"]  # the config's own


def test_parl_runner_reports_in_the_keys_compare_reads():
    trainer_result = {
        "seed": 3,
        "train_seconds": 1.5,
        "env_steps": 900,
        "episodes": 12,
        "reached": True,
        "last_eval": 480.0,
        "best_eval": 490.0,
        "final_eval": 470.0,
        "updates": {"RL": 5, "aux": 2},
        "stop_reason": "target return",
    }
    result = parl_runner.runner_result(trainer_result)
    assert result == {
        "seed": 3,
        "train_seconds": 1.5,
        "env_steps": 900,
        "episodes": 12,
        "reached": True,
        "greedy_check": 480.0,
        "best_greedy_check": 490.0,
        "greedy_mean_return": 470.0,
        "updates": 7,
    }
    ran = report.Run(ROW, report.PARL, 3, result={**result, "cpu_seconds": 2.0, "budget": 1_000})
    assert ran.reached and not ran.final_at_target  # 470 < 475


def test_both_sides_get_the_same_target_and_check_interval():
    parl_command = compare.parl_command(ROW, 2)
    sb3_command = compare.sb3_command(ROW, 2, "zoo", 1)
    for command in (parl_command, sb3_command):
        assert command[command.index("--target") + 1] == "475.0"
        assert command[command.index("--check-interval") + 1] == str(compare.CHECK_INTERVAL)
        assert command[command.index("--seed") + 1] == "2"


def test_options_reach_parl_runs_after_the_rows_own():
    row = dataclasses.replace(ROW, options=("tasks.RL.model.hidden_size=32",))
    args = compare.parse_args(["--option", "tasks.RL.algorithm.tau=1.0", "--option", "seed=2"])
    command = compare.parl_command(row, 0, args.option)
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--option"]
    assert pairs == ["tasks.RL.model.hidden_size=32", "tasks.RL.algorithm.tau=1.0", "seed=2"]
    assert command[command.index("--config") + 1] == str(compare.ROOT / row.config)
    assert compare.parse_args([]).option == [] and compare.parse_args([]).seeds == list(range(10))


def test_rows_have_unique_names_and_say_why_sb3_is_absent():
    names = [row.name for row in rows.ROWS]
    assert len(set(names)) == len(names)
    for row in rows.ROWS:
        assert (row.sb3_algo is None) == bool(row.sb3_absent), row.name
        assert (compare.ROOT / row.config).is_file() and row.config.startswith("examples/configs/")
        assert math.isfinite(row.threshold)


def test_a_missing_example_and_an_absent_sb3_counterpart_run_nothing():
    missing = rows.Row("toy", "CartPole-v1", 475.0, "REINFORCE", "examples/configs/no_such.yaml", sb3_absent="none")
    args = compare.parse_args(["--seeds", "0", "1"])
    loads = []
    sides, runs = compare.measure([missing], args, loads)
    assert runs == [] and loads == []
    assert sides["toy"][report.PARL].cells() == ["missing", "", "", ""]
    assert sides["toy"][report.SB3].cells() == ["n/a (none)", "", "", ""]
