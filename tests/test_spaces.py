"""Model sizes from the environment's spaces, the spec check at load, and example configs on
another environment with no size edits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer
from parl.models import AtariQModel, MLPActorCritic, MLPQModel
from parl.utils.spaces import action_sizes, observation_sizes, spec_mismatch

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "examples" / "configs"


def test_discrete_and_flat_box_spaces() -> None:
    assert observation_sizes(gym.spaces.Box(-1.0, 1.0, (4,))) == {"obs_dim": 4}
    assert action_sizes(gym.spaces.Discrete(3)) == {"num_actions": 3}
    assert action_sizes(gym.spaces.Box(-2.0, 2.0, (2,))) == {"action_dim": 2}


def test_image_box_gives_frames_and_screen_size() -> None:
    space = gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8)
    assert observation_sizes(space) == {"frames": 4, "screen_size": 84}
    model = AtariQModel(num_actions=6, **observation_sizes(space))
    assert spec_mismatch(model, space, gym.spaces.Discrete(6)) is None


@pytest.mark.parametrize(
    "function, space, words",
    [
        (observation_sizes, gym.spaces.Discrete(5), "unsupported observation space Discrete(5)"),
        (observation_sizes, gym.spaces.Box(0, 1, (3, 4)), "unsupported observation space Box(0.0, 1.0, (3, 4)"),
        (action_sizes, gym.spaces.MultiDiscrete([2, 3]), "unsupported action space MultiDiscrete([2 3])"),
        (action_sizes, gym.spaces.Box(-1, 1, (2, 2)), "unsupported action space Box(-1.0, 1.0, (2, 2)"),
    ],
)
def test_an_unsupported_space_is_one_line_naming_it(function, space, words: str) -> None:
    with pytest.raises(ValueError) as info:
        function(space)
    assert str(info.value).startswith(words) and "\n" not in str(info.value)


def test_spec_mismatch_finds_each_kind() -> None:
    obs, discrete = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
    assert spec_mismatch(MLPQModel(4, 2), obs, discrete) is None
    wrong_obs = spec_mismatch(MLPQModel(5, 2), obs, discrete)
    assert (wrong_obs.part, wrong_obs.env_side) == ("observation", "observation shape [4]")
    assert spec_mismatch(MLPQModel(4, 3), obs, discrete).model_side == "3 actions"
    continuous = spec_mismatch(MLPActorCritic(4, action_dim=1), obs, discrete)
    assert continuous.part == "action" and "float32" in continuous.model_side
    box = gym.spaces.Box(-2.0, 2.0, (1,))
    assert spec_mismatch(MLPActorCritic(4, action_dim=1), obs, box) is None
    assert spec_mismatch(MLPActorCritic(4, action_dim=2), obs, box).model_side == "action of shape [2]"


def test_parl_train_reports_a_wrong_obs_dim_on_one_line_with_status_2(tmp_path: Path) -> None:
    data = yaml.safe_load((CONFIGS / "ppo_cartpole.yaml").read_text())
    data["tasks"]["RL"]["model"]["obs_dim"] = 5
    data["log_dir"] = str(tmp_path / "runs")
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "parl", "train", str(path), "--quiet"],
        cwd=str(REPO),
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "Warning" not in line and line.strip()]
    assert lines == ["parl train: tasks.RL.model.obs_dim: 5 does not match env CartPole-v1's observation shape [4]"]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing started


@pytest.mark.parametrize(
    "name, budget, overrides",
    [
        ("ppo_cartpole", 2048, []),
        ("dqn_cartpole", 3000, []),  # 4 agents x 750 steps: past the 500-step warmup of each
    ],
)
def test_an_example_config_trains_on_acrobot_with_no_size_edits(
    tmp_path: Path, name: str, budget: int, overrides: list
) -> None:
    config = load_config(
        str(CONFIGS / f"{name}.yaml"),
        [
            "env.id=Acrobot-v1",
            f"train.max_env_steps={budget}",
            f"log_dir={tmp_path / name}",
            "evaluation.every_steps=null",
            "evaluation.episodes=1",
            "evaluation.start_return=null",
            *overrides,
        ],
    )
    trainer = Trainer(config, progress=False)
    result = trainer.run()
    assert result["updates"]["RL"] > 0
    model = trainer.manager.tasks["RL"].algorithm.model
    assert (model.obs_dim, model.num_actions) == (6, 3)  # Acrobot-v1's
