"""parl eval --video: evaluation episodes recorded as MP4 files through gymnasium's RecordVideo (the
optional extra parl[video]); without moviepy, or with an environment that cannot render, one line."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from parl.experiment.cli.commands import main
from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.evaluation.video import recording_env

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"


def train_briefly(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    overrides = ["-o", f"log_dir={run}", "-o", "train.max_env_steps=600", "-o", "agents=2"]
    assert main(["train", str(CONFIGS / "ppo_cartpole.yaml"), "--quiet", *overrides]) == 0
    return run


def test_eval_records_every_episode(tmp_path, capsys) -> None:
    pytest.importorskip("moviepy")
    run = train_briefly(tmp_path)
    capsys.readouterr()
    videos = tmp_path / "videos"
    status = main(
        ["eval", str(run / "config.yaml"), "--checkpoint", str(run), "--episodes", "2", "--video", str(videos)]
    )
    assert status == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["videos"] == [str(videos / f"episode-{i}-episode-0.mp4") for i in range(2)]
    for path in summary["videos"]:
        data = Path(path).read_bytes()
        assert len(data) > 1000 and data[4:8] == b"ftyp"  # an MP4 container


def test_without_moviepy_the_error_names_the_extra(tmp_path, capsys, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "moviepy" else real(name, *a))
    status = main(["eval", str(CONFIGS / "ppo_cartpole.yaml"), "--checkpoint", str(tmp_path), "--video", "v"])
    err = capsys.readouterr().err.strip()
    assert status == 1 and len(err.splitlines()) == 1
    assert err == "parl eval: --video needs moviepy, which is not installed: pip install 'parl[video]'"


def test_a_factory_without_render_mode_cannot_record(tmp_path) -> None:
    (tmp_path / "plain_factory.py").write_text(
        textwrap.dedent(
            """
            import gymnasium as gym

            def make():
                return gym.make("CartPole-v1")
            """
        )
    )
    config = load_config(
        str(CONFIGS / "ppo_cartpole.yaml"),
        [f"python_path=[{tmp_path}]", "env.id=null", "env.factory=plain_factory.make"],
    )
    with pytest.raises(ConfigError, match="env.factory: plain_factory.make takes no render_mode"):
        recording_env(config, str(tmp_path / "videos"), episode=0)
