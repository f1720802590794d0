"""Damaged counters in a checkpoint's robot.json (negative, not integers, huge, of the wrong type,
missing) are damage like any other: the checkpoint is skipped in one line and the older intact one
is loaded, by CheckpointManager.load_latest and by a resumed run, never with a traceback."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from test_trainer_result import A2C_CARTPOLE, FAR_FROM_TARGET, example_config

from parl.experiment.config.build import make_agent, task_settings
from parl.experiment.config.robot_config import RobotConfig
from parl.experiment.train.checkpoints import CheckpointManager, best_checkpoints
from parl.experiment.train.run_counters import MAX_COUNT, check_run_counters
from parl.experiment.train.trainer import Trainer
from parl.serving.checkpoint_format import CheckpointError

#: Two agents, checkpoints at about 400, 800 and 1200 env steps, a best checkpoint from one evaluation.
RUN = (
    *FAR_FROM_TARGET,
    "agents=2",
    "checkpoint.every_steps=400",
    "evaluation.every_steps=600",
    "evaluation.episodes=1",
    "evaluation.final_episodes=1",
)


def config_of(run: Path, max_env_steps: int = 1200) -> RobotConfig:
    return example_config(run, *RUN, f"train.max_env_steps={max_env_steps}")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("counters") / "run"
    Trainer(config_of(run), progress=False, stream=None).run()
    return run


@pytest.fixture
def run(trained_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy, symlinks=True)
    return copy


def checkpoints_of(run: Path) -> List[Path]:
    """The run's checkpoints, newest first."""
    return sorted((run / "checkpoints").glob("ckpt-*"), reverse=True)


def change_robot(checkpoint: Path, change: Callable[[dict], None]) -> None:
    path = checkpoint / "robot.json"
    robot = json.loads(path.read_text())
    change(robot)
    path.write_text(json.dumps(robot))


def counters_change(change: Callable[[dict], None]) -> Callable[[dict], None]:
    return lambda robot: change(robot["counters"])


def _set(*path, value) -> Callable[[dict], None]:
    def change(counters: dict) -> None:
        node = counters
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return counters_change(change)


def _drop(*path) -> Callable[[dict], None]:
    def change(counters: dict) -> None:
        node = counters
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return counters_change(change)


COUNTER_DAMAGE: Dict[str, tuple] = {
    "negative-episodes": (_set("episodes", value=-1), "episodes is -1, expected an integer in [0, "),
    "fractional-steps": (_set("finished_steps", value=12.5), "finished_steps is 12.5, expected an integer"),
    "huge-env-steps": (
        _set("env_steps", value=10**30),
        f"env_steps is {10**30}, expected an integer in [0, {MAX_COUNT}]",
    ),
    "bool-step": (_set("step", value=True), "step is True, expected an integer"),
    "string-seconds": (_set("elapsed_seconds", value="long"), "elapsed_seconds is 'long', expected a number"),
    "nan-seconds": (_set("elapsed_seconds", value=math.nan), "elapsed_seconds is nan, expected a number"),
    "infinite-baseline": (_set("evaluation_baseline", value=math.inf), "evaluation_baseline is inf, expected None"),
    "agents-a-string": (_set("agents", value="many"), "agents is 'many', expected a list of 2"),
    "one-agent-short": (counters_change(lambda c: c["agents"].pop()), "agents is [{"),
    "agent-a-list": (_set("agents", 0, value=[1, 2]), "agents[0] is [1, 2], expected a mapping"),
    "agent-counter-a-string": (_set("agents", 1, "total_steps", value="600"), "agents[1].total_steps is '600'"),
    "agent-counter-negative": (_set("agents", 0, "episode", value=-3), "agents[0].episode is -3"),
    "agent-counter-missing": (_drop("agents", 0, "total_steps"), "agents[0] lacks counter 'total_steps'"),
    "helpers-missing": (_drop("helpers"), "helpers is missing, expected a list of 2"),
    "helpers-null": (_set("helpers", value=None), "helpers is None, expected a list of 2"),
    "helper-entry-a-number": (_set("helpers", 0, value=5), "helpers[0] is 5, expected a mapping"),
    "episodes-missing": (_drop("episodes"), "episodes is missing, expected an integer"),
    "counters-a-list": (lambda robot: robot.update(counters=[1]), "counters [1] is not a mapping"),
    "robot-step-negative": (lambda robot: robot.update(step=-5), "step -5 is not an integer >= 0"),
    "robot-tasks-nested": (lambda robot: robot.update(tasks=[["RL"]]), "tasks [['RL']] is not a list of task names"),
    "robot-files-a-string": (lambda robot: robot.update(files="x"), "files 'x' is not a mapping"),
}


@pytest.mark.parametrize("case", sorted(COUNTER_DAMAGE))
def test_damaged_counters_are_skipped_for_the_older_checkpoint_in_one_line(run, case) -> None:
    change, words = COUNTER_DAMAGE[case]
    newest, older = checkpoints_of(run)[:2]
    change_robot(newest, change)
    config = config_of(run)
    tasks = {name: task_settings(config, name).make_task(name) for name in config.tasks}
    agents = [make_agent(config, i) for i in range(config.agents)]
    lines: List[str] = []
    found = CheckpointManager(str(run / "checkpoints")).load_latest(
        tasks, report=lines.append, check_counters=lambda counters: check_run_counters(counters, agents)
    )
    assert found is not None and found[0] == str(older), lines
    assert len(lines) == 1 and "\n" not in lines[0] and newest.name in lines[0] and words in lines[0], lines


@pytest.mark.parametrize("case", ["negative-episodes", "agent-counter-missing"])
def test_a_resumed_run_skips_damaged_counters_and_goes_on_from_the_older_checkpoint(run, case, capsys) -> None:
    newest, older = checkpoints_of(run)[:2]
    change_robot(newest, COUNTER_DAMAGE[case][0])
    result = Trainer(config_of(run, max_env_steps=1300), progress=False, resume=True, stream=None).run()
    err = capsys.readouterr().err
    assert result["resumed_from"] == str(older)
    assert "Traceback" not in err
    skipped = [line for line in err.splitlines() if "skipped checkpoint" in line]
    assert len(skipped) == 1 and newest.name in skipped[0] and COUNTER_DAMAGE[case][1] in skipped[0], err


def test_when_every_checkpoint_has_damaged_counters_resuming_is_one_line(run, capsys) -> None:
    from parl.experiment.cli.commands import main

    for checkpoint in checkpoints_of(run):
        change_robot(checkpoint, _set("episodes", value=-1))
    status = main(["train", str(A2C_CARTPOLE), "-o", f"log_dir={run}", *sum((["-o", o] for o in RUN), []), "--resume"])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err
    final = [line for line in err.splitlines() if line.startswith("parl train:")]
    assert len(final) == 1 and "no intact checkpoint" in final[0] and "episodes is -1" in final[0], err


@pytest.mark.parametrize(
    "change, words",
    [
        (_set("eval_mean_return", value="high"), "eval_mean_return is 'high', expected a finite number"),
        (_drop("passed"), "passed is missing, expected true or false"),
        (_set("eval_episodes", value=0), "eval_episodes is 0, expected an integer >= 1"),
    ],
)
def test_damaged_best_counters_are_reported_and_the_resumed_run_goes_on_without_a_best(
    run, change, words, capsys
) -> None:
    best, newest = best_checkpoints(str(run / "checkpoints")).latest(), checkpoints_of(run)[0]
    change_robot(Path(best), change)
    result = Trainer(config_of(run, max_env_steps=1300), progress=False, resume=True, stream=None).run()
    err = capsys.readouterr().err
    assert result["resumed_from"] == str(newest) and "Traceback" not in err
    assert any(words in line for line in err.splitlines()), err


def test_check_run_counters_takes_what_the_trainer_saves(trained_run) -> None:
    config = config_of(trained_run)
    agents = [make_agent(config, i) for i in range(config.agents)]
    for checkpoint in checkpoints_of(trained_run):
        check_run_counters(json.loads((checkpoint / "robot.json").read_text())["counters"], agents)
    with pytest.raises(ValueError, match=r"agents is \[\], expected a list of 2"):
        check_run_counters({**json.loads((checkpoint / "robot.json").read_text())["counters"], "agents": []}, agents)


def test_a_robot_file_refused_for_its_structure_is_never_loaded(run) -> None:
    newest = checkpoints_of(run)[0]
    change_robot(newest, lambda robot: robot.update(tasks="RL"))
    config = config_of(run)
    tasks = {name: task_settings(config, name).make_task(name) for name in config.tasks}
    with pytest.raises(CheckpointError, match="tasks 'RL' is not a list of task names"):
        CheckpointManager(str(run / "checkpoints")).load(str(newest), tasks)
