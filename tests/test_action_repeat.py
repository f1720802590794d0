"""Action repeat: an action step of K time steps (rewards summed, the last observation kept), in the
wrapper, in GymAgent's counts, as the config key env.action_repeat, and in a run's metrics."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import List, Optional

import gymnasium as gym
import numpy as np
import pytest
from test_gym_agent import RecordingHelper

from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.train.trainer import Trainer
from parl.utils import ActionRepeat, GymAgent
from parl.utils.action_repeat import TIME_STEPS
from parl.validation import ParameterError

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"


class TickEnv(gym.Env):
    """obs ``[episode, t]`` (float32, in one buffer it reuses), reward ``t`` at time step ``t`` (1-based);
    ends after ``length`` time steps, terminated."""

    def __init__(self, length: int = 10) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.buffer = np.zeros(2, np.float32)
        self.episode, self.t, self.actions = -1, 0, []

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        self.buffer[:] = (self.episode, 0)
        return self.buffer, {"start": True}

    def step(self, action):
        self.actions.append(action)
        self.t += 1
        self.buffer[:] = (self.episode, self.t)
        return self.buffer, float(self.t), self.t >= self.length, False, {"t": self.t}


def test_each_action_step_repeats_the_action_and_sums_the_rewards() -> None:
    env = ActionRepeat(TickEnv(length=10), 3)
    obs, info = env.reset()
    assert info == {"start": True} and list(obs) == [0, 0]
    obs, reward, terminated, truncated, info = env.step(2)
    assert list(obs) == [0, 3] and reward == 1 + 2 + 3 and not (terminated or truncated)
    assert info == {"t": 3, TIME_STEPS: 3} and env.unwrapped.actions == [2, 2, 2]
    env.step(1)
    env.step(0)
    # Time step 10 ends the episode after one of the three.
    obs, reward, terminated, truncated, info = env.step(1)
    assert list(obs) == [0, 10] and reward == 10 and terminated and info[TIME_STEPS] == 1


def test_the_maximum_of_the_last_two_observations() -> None:
    env = ActionRepeat(TickEnv(length=10), 4, observation="max_of_last_two")
    env.reset()
    obs, *_ = env.step(0)
    assert list(obs) == [0, 4]  # max of [0, 3] and [0, 4], although the env reused one buffer
    inner = TickEnv(length=10)
    env = ActionRepeat(inner, 4, observation="max_of_last_two")
    env.reset()
    obs, *_ = env.step(0)
    assert obs is not inner.buffer  # a new array, not the env's buffer that its next step changes
    one = ActionRepeat(TickEnv(length=1), 4, observation="max_of_last_two")
    one.reset()
    obs, _, terminated, _, info = one.step(0)
    assert list(obs) == [0, 1] and terminated and info[TIME_STEPS] == 1


def test_bad_settings_are_named() -> None:
    with pytest.raises(ParameterError, match="repeat must be an integer >= 1, got 0"):
        ActionRepeat(TickEnv(), 0)
    with pytest.raises(ParameterError, match="observation must be one of .*, got 'mean'"):
        ActionRepeat(TickEnv(), 2, observation="mean")


def test_gym_agent_counts_time_steps_and_action_steps() -> None:
    env = ActionRepeat(TickEnv(length=10), 4)
    agent = GymAgent(env, seed=0)
    helper = RecordingHelper()
    agent.helpers["RL"] = helper
    result = agent.run_one_episode()
    assert result == {"reward": float(sum(range(1, 11))), "steps": 10, "action_steps": 3}
    assert agent.total_steps == 10
    assert len(helper.stored) == 3 and [s["rewards"] for s in helper.stored] == [10.0, 26.0, 19.0]
    assert [s["terminated"] for s in helper.stored] == [False, False, True]
    plain = GymAgent(TickEnv(length=4), seed=0)
    plain.helpers["RL"] = RecordingHelper()
    assert plain.run_one_episode() == {"reward": 10.0, "steps": 4}  # no repeat: no action_steps


FACTORY = """
import gymnasium as gym

calls = []


def make(action_repeat: int = 1, length: int = 200):
    calls.append(action_repeat)
    return gym.make("CartPole-v1", max_episode_steps=length)


def make_any(**kwargs):
    return gym.make("CartPole-v1")
"""


def factory_config(tmp_path: Path, *overrides: str):
    (tmp_path / "repeat_factory.py").write_text(textwrap.dedent(FACTORY))
    return load_config(
        str(CONFIGS / "ppo_cartpole.yaml"),
        [f"python_path=[{tmp_path}]", "env.id=null", "env.factory=repeat_factory.make", *overrides],
    )


def test_the_config_key_wraps_an_env_or_is_passed_to_a_factory_that_takes_it(tmp_path) -> None:
    by_id = load_config(str(CONFIGS / "ppo_cartpole.yaml"), ["env.action_repeat=3"]).env.make()
    assert isinstance(by_id, ActionRepeat) and by_id.repeat == 3
    assert not isinstance(load_config(str(CONFIGS / "ppo_cartpole.yaml")).env.make(), ActionRepeat)

    config = factory_config(tmp_path, "env.action_repeat=3")
    env = config.env.make()
    import repeat_factory

    assert repeat_factory.calls[-1] == 3 and not isinstance(env, ActionRepeat)  # the factory repeats itself
    assert config.to_dict()["env"]["action_repeat"] == 3
    wrapped = factory_config(tmp_path, "env.factory=repeat_factory.make_any", "env.action_repeat=2").env.make()
    assert isinstance(wrapped, ActionRepeat) and wrapped.repeat == 2  # takes any keyword: wrapped, not passed


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env.action_repeat=0"], "env.action_repeat: expected an integer >= 1, got 0"),
        (["env.kwargs.action_repeat=2"], "env.kwargs.action_repeat: set env.action_repeat instead"),
    ],
)
def test_bad_action_repeats_are_config_errors(tmp_path, overrides: List[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        factory_config(tmp_path, *overrides)
    assert str(caught.value).startswith(message)


def test_a_run_counts_env_steps_in_time_steps_and_logs_action_steps(tmp_path) -> None:
    config = load_config(
        str(CONFIGS / "ppo_cartpole.yaml"),
        # No target: with two time steps per action, a greedy policy of a few hundred updates can
        # already balance the pole to 475, and the run would stop there (seen once in a few hundred).
        [
            "env.action_repeat=2",
            "train.max_env_steps=3000",
            "agents=2",
            "train.target_return=null",
            f"log_dir={tmp_path}",
        ],
    )
    trainer = Trainer(config, progress=False)
    result = trainer.run()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    episodes = [(r["episode/length"], r["episode/action_steps"]) for r in rows if "episode/length" in r]
    assert len(episodes) >= 10
    # Each action step is 2 time steps, the last one maybe 1 (CartPole fell after the first).
    assert all(2 * actions - 1 <= length <= 2 * actions for length, actions in episodes)
    assert result["env_steps"] == sum(agent.total_steps for agent in trainer.manager.agents) >= 3000
