"""Evaluations that always run: from the start by default (negative targets included), a start rule
relative to the run's returns that follows the target, and one line when a run had none."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml

from parl.experiment.cli.commands import main
from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.config.evaluation_start import BASELINE_EPISODES, EvaluationStart
from parl.experiment.train.trainer import Trainer, summary_lines

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"


def eval_rows(log_dir: Path) -> list:
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "eval/mean_return" in row]


def train_ppo(log_dir: Path, *overrides: str) -> Tuple[Dict[str, object], List[str]]:
    """Train ppo_cartpole to a negative target (-100) with ``overrides``; the result and the lines on its stream."""
    config = load_config(
        str(CONFIGS / "ppo_cartpole.yaml"), ["train.target_return=-100.0", f"log_dir={log_dir}", *overrides]
    )
    stream = io.StringIO()
    result = Trainer(config, progress=False, stream=stream).run()
    return result, stream.getvalue().splitlines()


def test_an_acrobot_style_negative_target_evaluates_from_the_start(tmp_path) -> None:
    # The CartPole config moved to Acrobot: returns are -500 (every step -1) until the policy learns;
    # the target is negative. Evaluations must not wait for the returns to reach anything.
    # A target no run reaches in 9,000 env steps (Acrobot's returns are -500 to about -60), so that no
    # evaluation passes and stops training before the third.
    result, _ = train_ppo(
        tmp_path,
        "env.id=Acrobot-v1",
        "train.max_env_steps=9000",
        "evaluation.every_steps=1000",
        "train.target_return=-10",
    )
    rows = eval_rows(tmp_path)
    # Acrobot's first episodes end at its 500-step limit: with 8 agents the first ends near 4,000 env steps.
    assert rows and rows[0]["step"] <= 4000 + 8 * 500
    assert result["evaluations"] == len(rows) >= 3
    assert all(-500 <= row["eval/mean_return"] <= 0 for row in rows)
    assert result["no_evaluation"] is None


def test_a_run_without_evaluations_says_why_in_one_line(tmp_path) -> None:
    result, lines = train_ppo(tmp_path, "evaluation.start_return=142.5", "train.max_env_steps=1500")
    assert result["evaluations"] == 0 and not eval_rows(tmp_path)
    warned = [line for line in lines if line.startswith("parl train: evaluation.start_return (142.5) is above")]
    assert len(warned) == 1 and "train.target_return (-100)" in warned[0]
    assert "never reached evaluation.start_return (142.5)" in result["no_evaluation"]
    assert f"warning: no evaluation ran: {result['no_evaluation']}" in summary_lines(result, str(tmp_path))
    assert json.loads((tmp_path / "result.json").read_text())["no_evaluation"] == result["no_evaluation"]


def test_parl_train_says_in_one_line_that_a_task_never_updated(tmp_path, capsys) -> None:
    overrides = ["train.max_env_steps=300", "agents=1", "tasks.RL.helper.warmup_steps=5000", f"log_dir={tmp_path}"]
    assert main(["train", str(CONFIGS / "dqn_cartpole.yaml"), "--quiet", *[f"-o{o}" for o in overrides]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "warning: no evaluation ran: task RL never updated" in lines


def test_start_fraction_follows_the_target_from_the_first_returns() -> None:
    start = EvaluationStart(start_return=None, start_fraction=0.3, target=-100.0)
    for _ in range(BASELINE_EPISODES - 1):
        start.observe(-500.0)
    assert start.threshold() is None and not start.ready(-100.0)  # no baseline yet
    assert "fewer than 20 training episodes ended" in start.why_not(-500.0)
    start.observe(-500.0)
    assert start.baseline == -500.0 and start.threshold() == pytest.approx(-380.0)
    assert not start.ready(-381.0)
    assert "never reached -380 (evaluation.start_fraction 0.3 of the way from" in start.why_not(-381.0)
    assert start.ready(-379.0)
    assert start.ready(-500.0)  # once started, evaluations go on
    later = start.observe  # later returns do not move the baseline
    later(0.0)
    assert start.baseline == -500.0

    cartpole = EvaluationStart(start_return=None, start_fraction=0.3, target=475.0)
    for _ in range(BASELINE_EPISODES):
        cartpole.observe(22.0)
    assert cartpole.threshold() == pytest.approx(22.0 + 0.3 * 453.0)


def test_the_start_rule_resumes_with_its_baseline() -> None:
    start = EvaluationStart(start_return=None, start_fraction=0.5, target=10.0)
    for _ in range(BASELINE_EPISODES):
        start.observe(0.0)
    assert start.ready(6.0)
    resumed = EvaluationStart(start_return=None, start_fraction=0.5, target=10.0)
    resumed.restore(start.counters())
    # The baseline of the run's first returns, not of the resumed policy's; the rule applies anew.
    assert resumed.baseline == 0.0 and resumed.threshold() == 5.0 and not resumed.started
    for _ in range(BASELINE_EPISODES):
        resumed.observe(9.0)
    assert resumed.baseline == 0.0 and not resumed.ready(4.0) and resumed.ready(5.0)
    unset = EvaluationStart(start_return=1.0, start_fraction=None, target=None)
    unset.restore({})  # a checkpoint of an earlier parl: nothing to take up
    assert not unset.started and unset.threshold() == 1.0
    assert EvaluationStart(start_return=None, start_fraction=None, target=None).ready(float("nan"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["evaluation.start_return=0.0", "evaluation.start_fraction=0.3"],
            "evaluation.start_fraction: give at most one of start_return and start_fraction",
        ),
        (
            ["train.target_return=null", "evaluation.start_fraction=0.3"],
            "evaluation.start_fraction: needs train.target_return",
        ),
        (
            ["evaluation.start_fraction=1.5"],
            "evaluation.start_fraction: expected a number in [0.0, 1.0] or null, got 1.5",
        ),
    ],
)
def test_start_rules_that_cannot_work_are_config_errors(overrides, message) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(str(CONFIGS / "ppo_cartpole.yaml"), overrides)
    assert str(caught.value).startswith(message)


def test_every_example_config_evaluates_from_the_start_or_by_a_rule_that_follows_its_target() -> None:
    paths = sorted(CONFIGS.glob("*.yaml")) + sorted((CONFIGS.parent).glob("*/*.yaml"))
    assert len(paths) > 10
    for path in paths:
        evaluation = yaml.safe_load(path.read_text()).get("evaluation") or {}
        assert evaluation.get("start_return") is None, path
