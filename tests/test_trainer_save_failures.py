"""parl train when a checkpoint cannot be written: a failed periodic save is one line and training
goes on; a failed final save is one line and exit status 1; never a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from parl.experiment import checkpoints
from parl.experiment.checkpoints import CheckpointManager, CheckpointWriteError
from parl.experiment.cli import main

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "configs" / "a2c_cartpole.yaml"


def train(tmp_path: Path, *overrides: str) -> int:
    args = ["train", str(CONFIG), "-o", f"log_dir={tmp_path / 'run'}", "-o", "train.max_env_steps=1500", "--quiet"]
    for override in overrides:
        args += ["-o", override]
    return main(args)


def failing_saves(monkeypatch: pytest.MonkeyPatch, fail: set) -> list:
    """Make CheckpointManager.save fail (a full disk) on the calls numbered in ``fail`` (1-based)."""
    calls: list = []
    save = CheckpointManager.save

    def flaky(self, tasks, counters, step):
        calls.append(step)
        if len(calls) in fail:
            raise CheckpointWriteError(f"checkpoint at step {step} not written: [Errno {errno.ENOSPC}] No space left")
        return save(self, tasks, counters, step)

    monkeypatch.setattr(checkpoints.CheckpointManager, "save", flaky)
    return calls


def test_a_failed_periodic_save_is_one_line_and_training_goes_on(tmp_path, monkeypatch, capsys) -> None:
    calls = failing_saves(monkeypatch, {1})
    status = train(tmp_path, "checkpoint.every_steps=500", "checkpoint.every_minutes=null")
    out, err = capsys.readouterr()
    assert status == 0
    assert len(calls) >= 2  # the run went on past the failed save, and the final one was written
    failures = [line for line in (out + err).splitlines() if "No space left" in line]
    assert len(failures) == 1 and failures[0].startswith("parl train: checkpoint at step")
    assert "Traceback" not in out + err
    assert "checkpoint: " in out


def test_a_failed_final_save_is_one_line_and_exit_status_1(tmp_path, monkeypatch, capsys) -> None:
    failing_saves(monkeypatch, {1})
    status = train(tmp_path, "checkpoint.every_steps=null", "checkpoint.every_minutes=null")
    out, err = capsys.readouterr()
    assert status == 1
    assert "Traceback" not in out + err
    final = [line for line in err.splitlines() if line.startswith("parl train: final checkpoint not written")]
    assert len(final) == 1 and "No space left" in final[0], (out, err)
