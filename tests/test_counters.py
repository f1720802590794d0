"""Agent and helper counters: what a resumed run takes up so schedules and seeding go on where they stopped."""

from __future__ import annotations

from typing import Dict, List, Optional

import gymnasium as gym
import numpy as np
import pytest

import parl
from parl.utils.gym_agent import GymAgent

from toys import CountEnv, EchoAgent, EchoModel, IdleAgent, RecordingCommunicator

# -- Agent ------------------------------------------------------------------------------------


class SeedEnv:
    """Gymnasium-style episodes of ``length`` steps that record the seed of every reset."""

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.action_space = gym.spaces.Discrete(2)
        self.reset_seeds: List[Optional[int]] = []
        self.t = 0

    def reset(self, seed: Optional[int] = None):
        self.reset_seeds.append(seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, self.t, np.float32), 1.0, self.t >= self.length, False, {}


class ConstantHelper(parl.AgentHelper):
    """Acts without a task (action 0, no states) and counts the transitions it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.stored = 0

    def initial_states(self) -> Dict[str, np.ndarray]:
        return {}

    def predict(self, inputs, states=None):
        return {"action": np.array([0], np.int64)}, {}

    def store_data(self, inputs, actions, rewards, next_inputs, terminated, truncated, states=None, next_states=None):
        self.stored += 1

    def learn(self):
        return None


def gym_agent(length: int = 3, seed: int = 5) -> GymAgent:
    agent = GymAgent(SeedEnv(length), seed=seed)
    agent.helpers["RL"] = ConstantHelper()
    return agent


def play(agent: parl.Agent, episodes: int) -> None:
    for _ in range(episodes):
        agent.run_one_episode()
        agent.episode += 1  # the Manager's loop counts episodes


def test_a_new_agent_trains_and_counts_episodes() -> None:
    agent = IdleAgent(env=None, seed=3)
    assert agent.training is True
    assert agent.counters() == {"episode": 0}
    agent.episode = 4
    assert agent.counters() == {"episode": 4}


def test_an_agent_takes_up_its_counters() -> None:
    agent = IdleAgent(env=None)
    agent.restore_counters({"episode": 7})
    assert agent.episode == 7


def test_gym_agent_counters_hold_episodes_and_env_steps() -> None:
    agent = gym_agent(length=3)
    play(agent, 2)
    assert agent.counters() == {"episode": 2, "total_steps": 6}


def test_a_restored_gym_agent_goes_on_counting_and_resets_unseeded() -> None:
    first = gym_agent(length=3, seed=5)
    play(first, 2)
    assert first.env.reset_seeds == [5, None]
    resumed = gym_agent(length=3, seed=5)
    resumed.restore_counters(first.counters())
    play(resumed, 2)
    # Episode 0 was played before the checkpoint: resuming must not seed as if it were the first.
    assert resumed.env.reset_seeds == [None, None]
    assert resumed.counters() == {"episode": 4, "total_steps": 12}


def test_an_agent_restored_before_finishing_an_episode_seeds_its_first_reset() -> None:
    agent = gym_agent(seed=9)
    agent.restore_counters({"episode": 0, "total_steps": 2})  # saved in the middle of episode 0
    play(agent, 2)
    assert agent.env.reset_seeds == [9, None]
    assert agent.total_steps == 2 + 6


def test_the_manager_plays_only_the_games_left_after_a_resume(make_manager) -> None:
    manager = make_manager()
    agent = EchoAgent(CountEnv(code=1, length=2), num_games=5)
    agent.restore_counters({"episode": 3})
    manager.add_agent(agent, {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.start()
    episodes = manager.join(timeout=30.0)
    assert not manager.errors
    assert [e["episode"] for e in episodes] == [3, 4]
    assert agent.counters() == {"episode": 5}


@pytest.mark.parametrize(
    "counters, words",
    [
        ({"episode": 2}, ["GymAgent", "missing 'total_steps'", "['episode']"]),
        ({"total_steps": 4}, ["GymAgent", "missing 'episode'"]),
        ({"episode": -1, "total_steps": 4}, ["GymAgent counter 'episode'", ">= 0", "-1"]),
        ({"episode": 2, "total_steps": 2.5}, ["GymAgent counter 'total_steps'", "integer", "2.5"]),
        ({"episode": "2", "total_steps": 4}, ["counter 'episode'", "'2'"]),
        ([("episode", 2)], ["GymAgent counters must be a mapping", "list"]),
    ],
)
def test_bad_counters_raise_naming_them_and_change_nothing(counters, words) -> None:
    agent = gym_agent()
    play(agent, 1)
    with pytest.raises(ValueError) as info:
        agent.restore_counters(counters)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert agent.counters() == {"episode": 1, "total_steps": 3}


# -- helpers ----------------------------------------------------------------------------------


def store(helper: parl.AgentHelper, steps: int) -> None:
    for step in range(steps):
        obs = np.array([step, 0], np.float32)
        helper.store_data({"obs": obs}, {"action": np.array([step])}, 1.0, {"obs": obs + 1}, False, False)


def test_on_policy_and_uniform_replay_helpers_keep_no_counters() -> None:
    for helper in (parl.OnPolicyHelper(sample_interval=4), parl.ExpReplayHelper(capacity=8, warmup_steps=2)):
        helper.bind(RecordingCommunicator(EchoModel()))
        store(helper, 3)
        assert helper.counters() == {}
        helper.restore_counters({})  # nothing to take up


def prioritized(beta_steps: int = 40) -> parl.ExpReplayHelper:
    return parl.ExpReplayHelper(capacity=8, warmup_steps=100, prioritized=True, beta_start=0.2, beta_steps=beta_steps)


@pytest.mark.parametrize("restore_before_bind", [True, False])
def test_prioritized_replay_goes_on_annealing_beta_after_a_resume(restore_before_bind: bool) -> None:
    first = prioritized()
    first.bind(RecordingCommunicator(EchoModel()))
    store(first, 10)
    assert first.counters() == {"replay_added": 10}
    assert first.buffer.beta == pytest.approx(0.2 + 0.8 * 10 / 40)

    resumed = prioritized()
    if restore_before_bind:  # as a trainer may, before Manager.add_agent binds the helpers
        resumed.restore_counters(first.counters())
        assert resumed.counters() == {"replay_added": 10}
        resumed.bind(RecordingCommunicator(EchoModel()))
    else:
        resumed.bind(RecordingCommunicator(EchoModel()))
        resumed.restore_counters(first.counters())
    assert len(resumed.buffer) == 0  # experience is not carried over ...
    assert resumed.buffer.beta == pytest.approx(first.buffer.beta)  # ... the schedule is
    store(resumed, 6)
    store(first, 6)
    assert resumed.counters() == first.counters() == {"replay_added": 16}
    assert resumed.buffer.beta == pytest.approx(first.buffer.beta)


def test_a_prioritized_helper_refuses_counters_without_its_own() -> None:
    helper = prioritized()
    with pytest.raises(ValueError, match="ExpReplayHelper counters: missing 'replay_added'"):
        helper.restore_counters({})
    with pytest.raises(ValueError, match="'replay_added'.*>= 0.*-3"):
        helper.restore_counters({"replay_added": -3})
    assert helper.counters() == {"replay_added": 0}
