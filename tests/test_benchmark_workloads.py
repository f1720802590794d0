"""benchmarks/workloads.py without training: what each side is asked to run, the table's figures, the doc section."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
workloads = importlib.import_module("workloads")
PARL, SB3 = workloads.PARL, workloads.SB3


def row(name: str, learn: bool = False) -> "workloads.Workload":
    return next(r for r in (workloads.LEARN if learn else workloads.THROUGHPUT) if r.name == name)


def options(command: list) -> list:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--option"]


def test_parl_gets_the_budget_in_frames_the_warmup_and_sb3s_target_and_no_evaluation():
    args = workloads.parse_args([])
    command = workloads.parl_command(row("dqn-atari"), 3, 6_000, args)
    assert "--no-eval" in command and command[command.index("--seed") + 1] == "3"
    opts = options(command)
    assert "train.max_env_steps=24000" in opts and "tasks.RL.helper.warmup_steps=1000" in opts
    assert "tasks.RL.algorithm.double_q=false" in opts and "agents=1" in opts
    assert "evaluation.every_steps=null" in opts
    double = options(workloads.parl_command(row("dqn-atari"), 3, 6_000, workloads.parse_args(["--double-q"])))
    assert "tasks.RL.algorithm.double_q=true" in double and "tasks.RL.algorithm.double_q=false" not in double
    sac = options(workloads.parl_command(row("sac-halfcheetah"), 0, 4_000, args))
    assert {"agent.random_steps=1000", "tasks.RL.helper.warmup_steps=1000", "train.max_env_steps=4000"} <= set(sac)


def test_both_sides_get_the_same_seed_budget_and_warmup_cut_for_short_budgets():
    args = workloads.parse_args(["--budget", "600"])
    sb3 = workloads.sb3_command(row("sac-halfcheetah"), 2, 600, args)
    assert sb3[sb3.index("--budget") + 1] == "600" and sb3[sb3.index("--learning-starts") + 1] == "300"
    assert sb3[sb3.index("--seed") + 1] == "2" and "--eval-episodes" not in sb3
    assert "agent.random_steps=300" in options(workloads.parl_command(row("sac-halfcheetah"), 2, 600, args))
    assert "--learning-starts" not in workloads.sb3_command(row("ppo-atari"), 0, 4_096, args)


def test_learn_mode_evaluates_both_sides_on_the_same_number_of_episodes():
    args = workloads.parse_args(["--learn"])
    assert args.seeds == [0, 1, 2]
    minatar = row("dqn-minatar", learn=True)
    parl = workloads.parl_command(minatar, 0, minatar.budget, args)
    assert "--no-eval" not in parl and "evaluation.final_episodes=50" in options(parl)
    sb3 = workloads.sb3_command(minatar, 0, minatar.budget, args)
    assert sb3[sb3.index("--eval-episodes") + 1] == "50"


def test_every_parl_row_is_a_valid_config():
    load_config = importlib.import_module("parl.experiment.config.robot_config").load_config
    args = workloads.parse_args([])
    for learn in (False, True):
        for r in workloads.LEARN if learn else workloads.THROUGHPUT:
            command = workloads.parl_command(r, 0, r.budget, workloads.parse_args(["--learn"]) if learn else args)
            load_config(str(workloads.ROOT / r.config), options(command))


def outcome(r, side: str, env_steps: int, seconds: float, cpu: float, updates: int = 10):
    result = {"env_steps": env_steps, "train_seconds": seconds, "run_cpu_seconds": cpu, "updates": updates}
    return workloads.Outcome(r, side, 0, result=result)


def test_speeds_count_parls_frames_as_action_steps_and_ratios_are_parl_over_sb3():
    dqn = row("dqn-atari")
    outcomes = [outcome(dqn, PARL, 4_000, 10.0, 5.0), outcome(dqn, SB3, 1_000, 5.0, 5.0)]
    assert outcomes[0].speed == 100.0 and outcomes[1].speed == 200.0
    table = workloads.throughput_table([dqn], outcomes).splitlines()
    assert len({line.count("|") for line in table}) == 1
    cells = [c.strip() for c in table[2].split("|")[1:-1]]
    assert cells[3:7] == ["100.0", "400", "10", "200.0"]  # steps/s, frames/s, updates, steps per CPU second
    assert cells[-2:] == ["0.50", "1.00"]  # parl/SB3 by wall and by CPU time


def test_a_failed_side_shows_its_error_and_no_ratio():
    sac = row("sac-halfcheetah")
    outcomes = [outcome(sac, PARL, 100, 1.0, 1.0), workloads.Outcome(sac, SB3, 0, error="boom")]
    line = workloads.throughput_table([sac], outcomes).splitlines()[2]
    assert "error: boom" in line and "n/a" in line


@pytest.mark.parametrize("learn", [False, True])
def test_write_replaces_only_its_own_section(tmp_path, learn):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- compare:begin -->\nkept\n<!-- compare:end -->\n")
    args = workloads.parse_args(["--learn"] if learn else [])
    for table in ("first", "second"):
        text = workloads.section(args, "cmd", [0.5], table)
        workloads.write_section(doc, text, *workloads.MARKERS[learn])
    content = doc.read_text()
    assert "kept" in content and "second" in content and "first" not in content
    assert content.count(workloads.MARKERS[learn][0]) == 1
