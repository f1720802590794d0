"""parl's exploring agents: epsilon-greedy, random start, Gaussian and Ornstein-Uhlenbeck action noise."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from parl.experiment.config.build import make_agent
from parl.experiment.config.robot_config import load_config
from parl.utils import EpsilonGreedyAgent, GaussianNoiseAgent, LinearSchedule, OUNoise, OUNoiseAgent, RandomStartAgent
from parl.validation import ParameterError

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"


class _Policy:
    """A helper stand-in whose policy always answers zeros."""

    def __init__(self, shape) -> None:
        self.shape = shape

    def predict(self, inputs, states):
        return {"action": np.zeros(self.shape, dtype=np.float32)}, {}


def test_epsilon_one_always_samples_the_action_space() -> None:
    agent = EpsilonGreedyAgent(gym.make("CartPole-v1"), epsilon=LinearSchedule(1.0, 1.0, 1), seed=3)
    actions = {int(agent.act({}, {})[0]["action"][0]) for _ in range(50)}
    assert actions == {0, 1}


def test_random_start_then_gaussian_noise_from_one_generator() -> None:
    agent = GaussianNoiseAgent(gym.make("Pendulum-v1"), noise_std=0.1, random_steps=2, seed=5)
    agent.helpers = {"RL": _Policy((1,))}
    rng = np.random.default_rng(5)
    first = agent.act({}, {})[0]["action"]
    assert np.array_equal(first, rng.uniform(-1.0, 1.0, (1,)).astype(np.float32))
    agent.total_steps = 2
    noisy = agent.act({}, {})[0]["action"]
    assert np.array_equal(noisy, np.clip(rng.normal(0.0, 0.1, (1,)), -1.0, 1.0).astype(np.float32))
    agent.training = False
    assert np.array_equal(agent.act({}, {})[0]["action"], np.zeros(1, dtype=np.float32))


def test_ou_noise_is_correlated_and_resets() -> None:
    noise = OUNoise((2,), np.random.default_rng(0), theta=0.15, sigma=0.2, dt=0.01)
    samples = np.array([noise() for _ in range(200)])
    assert samples.shape == (200, 2) and np.corrcoef(samples[:-1, 0], samples[1:, 0])[0, 1] > 0.9
    noise.reset()
    assert np.array_equal(noise.state, np.zeros(2))
    with pytest.raises(ParameterError):
        OUNoise((1,), np.random.default_rng(0), sigma=0.0)


def test_ou_noise_agent_resets_its_noise_each_episode() -> None:
    agent = OUNoiseAgent(gym.make("Pendulum-v1"), random_steps=0, seed=1)
    agent.helpers = {"RL": _Policy((1,))}
    assert agent.act({}, {})[0]["action"].shape == (1,)
    assert np.any(agent.noise.state != 0)
    agent.reset_env()
    assert np.array_equal(agent.noise.state, np.zeros(1))


def test_random_steps_are_checked() -> None:
    with pytest.raises(ParameterError, match="random_steps"):
        RandomStartAgent(gym.make("Pendulum-v1"), random_steps=-1, seed=0)


@pytest.mark.parametrize(
    "name, cls",
    [("dqn_cartpole", EpsilonGreedyAgent), ("td3_pendulum", GaussianNoiseAgent), ("sac_pendulum", RandomStartAgent)],
)
def test_configs_name_the_agents_without_python_path(name: str, cls: type) -> None:
    config = load_config(str(CONFIGS / f"{name}.yaml"))
    assert config.python_path == []
    assert type(make_agent(config, 0)) is cls
