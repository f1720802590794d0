"""The checkpoint of a run's best evaluation: kept in <log_dir>/checkpoints/best beside the latest ones,
holding the weights the final evaluation plays, loadable by `parl eval` and `parl export` as
`--checkpoint best`, and taken up by a resumed run."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import List

import pytest
from test_trainer_result import FAR_FROM_TARGET, EvaluationSpy, example_config, fingerprint

import parl
from parl.experiment.cli.commands import main
from parl.experiment.config.build import task_settings
from parl.experiment.config.robot_config import load_config
from parl.experiment.train.checkpoints import BEST, CheckpointManager, CheckpointWriteError, best_checkpoints
from parl.experiment.train.trainer import Trainer

#: A run far from its target that evaluates (one episode each) every 300 env steps.
SHORT = (*FAR_FROM_TARGET, "evaluation.every_steps=300", "evaluation.episodes=2", "evaluation.start_return=null")


def train(tmp_path: Path, *overrides: str, resume: bool = False, made: List[Trainer] = None) -> dict:
    config = example_config(tmp_path / "run", *SHORT, *overrides)
    trainer = Trainer(config, progress=False, resume=resume)
    if made is not None:
        made.append(trainer)
    return trainer.run()


def fresh_tasks(config_path: str) -> dict:
    config = load_config(config_path)
    return {name: task_settings(config, name).make_task(name) for name in config.tasks}


def test_the_best_evaluation_is_kept_beside_the_latest_checkpoints_and_loads(tmp_path, monkeypatch) -> None:
    spy = EvaluationSpy(monkeypatch)
    made: List[Trainer] = []
    result = train(tmp_path, "train.max_env_steps=2500", "checkpoint.every_steps=500", "checkpoint.keep=1", made=made)
    checkpoints = tmp_path / "run" / "checkpoints"
    best = best_checkpoints(str(checkpoints)).latest()
    assert best is not None and os.path.dirname(best) == str(checkpoints / BEST)
    assert [p.name for p in (checkpoints / BEST).iterdir() if p.name.startswith("ckpt-")] == [os.path.basename(best)]
    assert CheckpointManager(str(checkpoints)).latest() == result["checkpoint"] != best  # keep=1 left the best alone

    evaluations = spy.during_training()
    assert len(evaluations) >= 2  # about 8; fewer when a loaded machine holds up the training loop
    winner = max(evaluations, key=lambda call: call["returns"][0])  # far from the target: one episode each
    tasks = fresh_tasks(str(tmp_path / "run" / "config.yaml"))
    counters = best_checkpoints(str(checkpoints)).load(best, tasks)
    assert fingerprint(tasks) == winner["weights"] == spy.final()["weights"]  # what the final evaluation played
    assert counters["eval_mean_return"] == result["best_eval"] == winner["returns"][0]
    assert counters["passed"] is False and counters["eval_episodes"] == 1
    assert int(os.path.basename(best)[len("ckpt-") :]) == counters["env_steps"]
    assert made[0].best_checkpoint.directory == str(checkpoints / BEST)


def test_eval_and_export_take_the_best_checkpoint(tmp_path, capsys) -> None:
    train(tmp_path, "train.max_env_steps=1500")
    run = str(tmp_path / "run")
    config = str(tmp_path / "run" / "config.yaml")
    assert main(["eval", config, "--checkpoint", BEST, "--episodes", "2"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert os.path.dirname(summary["checkpoint"]) == os.path.join(run, "checkpoints", BEST)

    out = str(tmp_path / "policy")
    assert main(["export", run, "-o", out, "--checkpoint", BEST]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["checkpoint"] == summary["checkpoint"]
    tasks = fresh_tasks(config)
    best_checkpoints(os.path.join(run, "checkpoints")).load(summary["checkpoint"], tasks)
    policy = parl.load_policy(out)
    assert fingerprint(policy.tasks) == fingerprint(tasks)


def test_best_without_an_evaluation_is_one_line(tmp_path, capsys) -> None:
    train(tmp_path, "train.max_env_steps=600", "evaluation.start_return=1e9")
    assert not (tmp_path / "run" / "checkpoints" / BEST).exists()
    assert main(["eval", str(tmp_path / "run" / "config.yaml"), "--checkpoint", BEST]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no best checkpoint" in err and "no evaluation ran" in err


def test_a_resumed_run_keeps_its_best_evaluation(tmp_path, monkeypatch) -> None:
    first = train(tmp_path, "train.max_env_steps=1500")
    spy = EvaluationSpy(monkeypatch)
    best = best_checkpoints(str(tmp_path / "run" / "checkpoints")).latest()
    # No evaluation after the resume: the best is the first run's, and its weights play the final one.
    resumed = train(tmp_path, "train.max_env_steps=2000", "evaluation.start_return=1e9", resume=True)
    assert resumed["best_eval"] == first["best_eval"]
    assert best_checkpoints(str(tmp_path / "run" / "checkpoints")).latest() == best
    tasks = fresh_tasks(str(tmp_path / "run" / "config.yaml"))
    best_checkpoints(str(tmp_path / "run" / "checkpoints")).load(best, tasks)
    assert spy.final()["weights"] == fingerprint(tasks)


@pytest.mark.parametrize("damage", ["robot.json", "RL.safetensors"])
def test_a_damaged_best_checkpoint_is_reported_and_the_resumed_run_goes_on(tmp_path, damage, capsys) -> None:
    train(tmp_path, "train.max_env_steps=1200")
    best = best_checkpoints(str(tmp_path / "run" / "checkpoints")).latest()
    with open(os.path.join(best, damage), "r+b") as f:
        f.write(b"garbage")
    config = example_config(tmp_path / "run", *SHORT, "train.max_env_steps=1500")
    result = Trainer(config, progress=False, resume=True, stream=None).run()
    assert result["resumed_from"] is not None
    assert "best" in capsys.readouterr().err


def test_a_best_checkpoint_that_cannot_be_written_is_one_line_and_the_run_goes_on(tmp_path, monkeypatch) -> None:
    save = CheckpointManager.save

    def full_disk_for_best(self, tasks, counters, step, extras=None):
        if os.path.basename(self.directory) == BEST:
            raise CheckpointWriteError(f"checkpoint at step {step} not written: [Errno 28] No space left on device")
        return save(self, tasks, counters, step, extras)

    monkeypatch.setattr(CheckpointManager, "save", full_disk_for_best)
    stream = io.StringIO()
    config = example_config(tmp_path / "run", *SHORT, "train.max_env_steps=1500")
    result = Trainer(config, progress=False, stream=stream).run()
    lines = stream.getvalue().splitlines()
    assert result["checkpoint"] is not None and result["evaluations"] >= 2
    # Tried again with each checkpoint (here only the final one) while it is not written.
    assert lines and all(line.startswith("parl train: best checkpoint at step ") for line in lines)
