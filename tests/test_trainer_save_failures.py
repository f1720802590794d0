"""parl train when a file of the run cannot be written (a full disk, a read-only directory), never a
traceback: a failed periodic save is one line and training goes on; a failed final save is one line
and exit status 1; metrics that cannot be written are one line, switched off, and the run goes on
to its final checkpoint; config.yaml at the start is one line and exit status 2; result.json at
the end is one line and exit status 1."""

from __future__ import annotations

import errno
import io
import json
import os
from pathlib import Path

import pytest

from parl.experiment.cli.commands import main
from parl.experiment.train import checkpoints, metrics, trainer
from parl.experiment.train.checkpoints import BEST, CheckpointManager, CheckpointWriteError
from parl.experiment.train.metrics import MetricsWriter

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "configs" / "a2c_cartpole.yaml"


def train(tmp_path: Path, *overrides: str) -> int:
    args = ["train", str(CONFIG), "-o", f"log_dir={tmp_path / 'run'}", "-o", "train.max_env_steps=1500", "--quiet"]
    for override in overrides:
        args += ["-o", override]
    return main(args)


def failing_saves(monkeypatch: pytest.MonkeyPatch, fail: set) -> list:
    """Make CheckpointManager.save fail (a full disk) on the calls numbered in ``fail`` (1-based); the
    saves of the best evaluation's checkpoint (``checkpoints/best``) are neither counted nor failed."""
    calls: list = []
    save = CheckpointManager.save

    def flaky(self, tasks, counters, step, extras=None):
        if os.path.basename(self.directory) == BEST:
            return save(self, tasks, counters, step, extras)
        calls.append(step)
        if len(calls) in fail:
            raise CheckpointWriteError(f"checkpoint at step {step} not written: [Errno {errno.ENOSPC}] No space left")
        return save(self, tasks, counters, step, extras)

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


def full_disk(path: str = "") -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path or None)


class FillingFile(io.TextIOWrapper):
    """A text file whose disk is full after ``rows`` writes."""

    rows = 0

    def write(self, text: str) -> int:
        FillingFile.rows -= 1
        if FillingFile.rows < 0:
            raise full_disk()
        return super().write(text)


def the_failure(out: str, err: str, words: str) -> str:
    assert "Traceback" not in out + err
    lines = [line for line in (out + err).splitlines() if words in line]
    assert len(lines) == 1, (out, err)
    return lines[0]


def test_a_full_disk_for_metrics_is_one_line_metrics_stop_and_the_run_ends_with_its_checkpoint(
    tmp_path, monkeypatch, capsys
) -> None:
    def filling_open(path, mode="r", **kwargs):
        assert path.endswith("metrics.jsonl") and mode == "a"
        FillingFile.rows = 3
        return FillingFile(open(path, "ab"), **kwargs)

    monkeypatch.setattr(metrics, "open", filling_open, raising=False)
    status = train(tmp_path, "checkpoint.every_steps=null", "checkpoint.every_minutes=null")
    out, err = capsys.readouterr()
    assert status == 0
    line = the_failure(out, err, "No space left on device")
    assert line.startswith("parl: metrics off, ") and "metrics.jsonl not written" in line, line
    assert "checkpoint: " in out and (tmp_path / "run" / "result.json").is_file()
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 3 and all(json.loads(row)["step"] >= 0 for row in rows)  # those before the disk filled


def test_a_full_disk_for_tensorboard_events_is_one_line_and_the_run_goes_on(tmp_path, monkeypatch, capsys) -> None:
    def full(self, step, numbers, now):
        raise full_disk()

    monkeypatch.setattr(MetricsWriter, "_write_events", full)
    status = train(tmp_path, "checkpoint.every_steps=null", "checkpoint.every_minutes=null")
    out, err = capsys.readouterr()
    assert status == 0
    line = the_failure(out, err, "No space left on device")
    assert line.startswith("parl: metrics off, ") and "events.out.tfevents" in line, line
    assert "checkpoint: " in out


@pytest.mark.parametrize("name, status", [("config.yaml", 2), ("result.json", 1)])
def test_a_full_disk_for_config_or_result_is_one_line_and_an_exit_status(
    tmp_path, monkeypatch, capsys, name, status
) -> None:
    def full_for_name(path, *args, **kwargs):
        if os.path.basename(path) == f"{name}.tmp":
            open(path, "w").close()  # created, then the disk is full
            raise full_disk(path)
        return open(path, *args, **kwargs)

    monkeypatch.setattr(trainer, "open", full_for_name, raising=False)
    assert train(tmp_path) == status
    out, err = capsys.readouterr()
    line = the_failure(out, err, "No space left on device")
    assert line == f"parl train: {tmp_path / 'run' / name} not written: No space left on device", line
    assert not (tmp_path / "run" / f"{name}.tmp").exists() and not (tmp_path / "run" / name).exists()
    if name == "result.json":  # the run trained and wrote its final checkpoint first
        assert CheckpointManager(str(tmp_path / "run" / "checkpoints")).latest() is not None


def test_a_read_only_log_dir_turns_the_metrics_writer_off_in_one_line(tmp_path, monkeypatch) -> None:
    # What opening a file in a directory without write permission raises (as a user other than root;
    # root writes there anyway, so the refusal is injected where the writer opens its file).
    def read_only(path, mode="r", **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(metrics, "open", read_only, raising=False)
    lines: list = []
    with MetricsWriter(str(tmp_path), report=lines.append) as writer:
        writer.scalars(1, {"a": 1.0})  # dropped
    assert len(lines) == 1 and "Permission denied" in lines[0] and "metrics.jsonl" in lines[0], lines
    assert writer.failure is not None and not (tmp_path / "metrics.jsonl").exists()
