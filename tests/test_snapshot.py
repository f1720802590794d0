"""Run snapshots: every run directory keeps its config and the parl sources it ran with (an archive, its
hash, the git commit), enough to replay an old run with those sources."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import parl
from parl.experiment.config.robot_config import load_config
from parl.experiment.train.snapshot import (
    ARCHIVE_FILE,
    SNAPSHOT_DIR,
    SOURCE_FILE,
    package_dir,
    source_archive,
    source_files,
    write_snapshot,
)
from parl.experiment.train.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples" / "configs" / "a2c_cartpole.yaml"


def train(log_dir: Path, *overrides: str, resume: bool = False) -> dict:
    config = load_config(str(CONFIG), [f"log_dir={log_dir}", "agents=2", "train.max_env_steps=400", *overrides])
    return Trainer(config, progress=False, resume=resume).run()


def test_a_run_keeps_its_config_and_the_parl_sources_it_ran_with(tmp_path) -> None:
    train(tmp_path)
    snapshot = tmp_path / SNAPSHOT_DIR
    source = json.loads((snapshot / SOURCE_FILE).read_text())
    assert (snapshot / CONFIG.name).read_text() == CONFIG.read_text()  # comments and all
    assert (tmp_path / "config.yaml").is_file()  # the resolved config beside it
    archive = (snapshot / ARCHIVE_FILE).read_bytes()
    assert source["source_sha256"] == hashlib.sha256(archive).hexdigest()
    assert source["package"] == os.path.dirname(os.path.abspath(parl.__file__))
    assert source["python"] == sys.version.split()[0] and source["libraries"]["numpy"] is not None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
        assert names == source_files(package_dir()) and len(names) == source["source_files"]
        assert "parl/experiment/train/trainer.py" in names and "parl/runtime/cooperative/_cooperative.c" in names
        assert not any("__pycache__" in name or name.endswith(".so") for name in names)
        here = (REPO / "parl" / "experiment" / "train" / "snapshot.py").read_bytes()
        assert tar.extractfile("parl/experiment/train/snapshot.py").read() == here


def test_the_archive_is_the_same_for_the_same_sources() -> None:
    assert source_archive(package_dir()) == source_archive(package_dir())


def test_the_git_commit_and_whether_the_checkout_had_changes(tmp_path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("parl is not a git checkout here")
    write_snapshot(str(tmp_path))
    recorded = json.loads((tmp_path / SNAPSHOT_DIR / SOURCE_FILE).read_text())["git"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    changes = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout
    assert recorded == {"commit": head.strip(), "dirty": bool(changes.strip())}


def test_a_resumed_run_adds_a_snapshot_only_when_its_sources_differ(tmp_path) -> None:
    train(tmp_path, "checkpoint.every_steps=200")
    first = (tmp_path / SNAPSHOT_DIR / SOURCE_FILE).read_text()
    train(tmp_path, "train.max_env_steps=800", resume=True)
    assert (tmp_path / SNAPSHOT_DIR / SOURCE_FILE).read_text() == first
    assert not list((tmp_path / SNAPSHOT_DIR).glob("resumed-*"))
    # The sources changed since (here: the recorded hash is another one).
    recorded = json.loads(first)
    recorded["source_sha256"] = "0" * 64
    (tmp_path / SNAPSHOT_DIR / SOURCE_FILE).write_text(json.dumps(recorded))
    result = train(tmp_path, "train.max_env_steps=1200", resume=True)
    [resumed] = list((tmp_path / SNAPSHOT_DIR).glob("resumed-*"))
    assert resumed.name == f"resumed-{json.loads(Path(result['resumed_from'], 'robot.json').read_text())['step']}"
    assert (resumed / ARCHIVE_FILE).read_bytes() == (tmp_path / SNAPSHOT_DIR / ARCHIVE_FILE).read_bytes()


def test_an_old_run_replays_with_the_sources_of_its_snapshot(tmp_path) -> None:
    run = tmp_path / "run"
    train(run, "seed=5")
    old = tmp_path / "old"
    with tarfile.open(run / SNAPSHOT_DIR / ARCHIVE_FILE) as tar:
        tar.extractall(old, filter="data")
    replay = tmp_path / "replay"
    done = subprocess.run(
        [sys.executable, "-m", "parl", "train", str(run / "config.yaml"), "--quiet", "-o", f"log_dir={replay}"],
        env={**os.environ, "PYTHONPATH": str(old), "PARL_NO_EXTENSION": "1"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    replayed = json.loads((replay / SNAPSHOT_DIR / SOURCE_FILE).read_text())
    assert replayed["package"] == str(old / "parl")  # the snapshot's sources ran
    assert replayed["source_sha256"] == json.loads((run / SNAPSHOT_DIR / SOURCE_FILE).read_text())["source_sha256"]
    assert json.loads((replay / "result.json").read_text())["seed"] == 5


def test_a_snapshot_that_cannot_be_written_is_reported_and_the_run_goes_on(tmp_path, capsys) -> None:
    (tmp_path / SNAPSHOT_DIR).write_text("a file where the snapshot directory goes")
    result = train(tmp_path)
    assert result["checkpoint"] is not None
    assert "parl train: snapshot not written: " in capsys.readouterr().err
