"""env_action_converter and GymAgent's episode loop (transitions, chained states, episode starts)."""

from __future__ import annotations

from typing import Dict, List, Optional

import gymnasium as gym
import numpy as np
import pytest

import parl
from parl.core.errors import StoppedError
from parl.utils.gym_agent import GymAgent, env_action_converter, model_action_converter, obs_inputs

# -- env_action_converter ---------------------------------------------------------------------


def test_discrete_actions_become_ints() -> None:
    convert = env_action_converter(gym.spaces.Discrete(4))
    result = convert({"action": np.array([3], np.int64)})
    assert result == 3 and type(result) is int


def test_the_action_name_can_be_chosen() -> None:
    convert = env_action_converter(gym.spaces.Discrete(4), name="move")
    assert convert({"move": np.array([2], np.int64), "action": np.array([0])}) == 2


def test_box_actions_are_clipped_to_unit_range_and_scaled_to_the_bounds() -> None:
    low, high = np.array([-2.0, 0.0, 10.0], np.float32), np.array([2.0, 1.0, 30.0], np.float32)
    space = gym.spaces.Box(low=low, high=high, dtype=np.float32)
    convert = env_action_converter(space)
    np.testing.assert_allclose(convert({"action": np.array([-1.0, -1.0, -1.0], np.float32)}), [-2.0, 0.0, 10.0])
    np.testing.assert_allclose(convert({"action": np.array([1.0, 1.0, 1.0], np.float32)}), [2.0, 1.0, 30.0])
    np.testing.assert_allclose(convert({"action": np.array([0.0, 0.0, 0.0], np.float32)}), [0.0, 0.5, 20.0])
    np.testing.assert_allclose(convert({"action": np.array([0.5, -0.5, 0.25], np.float32)}), [1.0, 0.25, 22.5])
    # Outside [-1, 1]: clipped first, so the env never sees an action outside its bounds.
    clipped = convert({"action": np.array([5.0, -3.0, 1.5], np.float32)})
    np.testing.assert_allclose(clipped, [2.0, 0.0, 30.0])
    assert space.contains(clipped.astype(np.float32))


def test_a_symmetric_box_with_scalar_bounds() -> None:
    convert = env_action_converter(gym.spaces.Box(low=-2.0, high=2.0, shape=(1,), dtype=np.float32))
    np.testing.assert_allclose(convert({"action": np.array([0.3], np.float32)}), [0.6], rtol=1e-6)
    assert convert({"action": np.array([0.3], np.float32)}).dtype == np.float32


@pytest.mark.parametrize(
    "low, high",
    [(-np.inf, 1.0), (0.0, np.inf), (np.array([0.0, -np.inf], np.float32), np.array([1.0, 1.0], np.float32))],
)
def test_an_unbounded_box_raises(low, high) -> None:
    space = gym.spaces.Box(low=low, high=high, shape=(2,), dtype=np.float32)
    with pytest.raises(ValueError, match="bounded"):
        env_action_converter(space)


def test_other_spaces_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="MultiBinary"):
        env_action_converter(gym.spaces.MultiBinary(3))


def test_an_env_action_becomes_the_models_again() -> None:
    discrete = model_action_converter(gym.spaces.Discrete(3))
    assert discrete(2)["action"].tolist() == [2] and discrete(np.int64(1))["action"].dtype == np.int64
    box = gym.spaces.Box(np.array([-3, 0], np.float32), np.array([3, 0], np.float32))  # a degenerate 2nd axis
    to_env, to_model = env_action_converter(box), model_action_converter(box)
    model = {"action": np.array([0.5, 0.7], np.float32)}
    np.testing.assert_allclose(to_model(to_env(model))["action"], [0.5, 0.0])  # no range: 0
    np.testing.assert_allclose(to_model(np.array([9.0, 0.0]))["action"], [1.0, 0.0])  # clipped to [-1, 1]
    with pytest.raises(ValueError, match="Box action space must be bounded"):
        model_action_converter(gym.spaces.Box(-np.inf, np.inf, (1,)))


def test_obs_inputs_is_a_float32_obs_entry() -> None:
    inputs = obs_inputs([1, 2, 3])
    assert list(inputs) == ["obs"] and inputs["obs"].dtype == np.float32
    np.testing.assert_array_equal(inputs["obs"], [1.0, 2.0, 3.0])


# -- GymAgent.run_one_episode ---------------------------------------------------------------------


class StepEnv:
    """Gymnasium-style: obs ``[episode, step]``, reward ``step + 1``; ends after ``length`` steps
    (terminated on even episodes, truncated on odd ones). Records the actions it receives."""

    def __init__(self, length: int, action_space) -> None:
        self.length = length
        self.action_space = action_space
        self.episode = -1
        self.t = 0
        self.actions: List[object] = []
        self.reset_seeds: List[Optional[int]] = []

    def reset(self, seed: Optional[int] = None):
        self.reset_seeds.append(seed)
        self.episode += 1
        self.t = 0
        return np.array([self.episode, 0.0]), {}

    def step(self, action):
        self.actions.append(action)
        self.t += 1
        over = self.t >= self.length
        terminated = over and self.episode % 2 == 0
        truncated = over and not terminated
        return np.array([self.episode, float(self.t)]), float(self.t), terminated, truncated, {}


class RecordingHelper(parl.AgentHelper):
    """Acts without a task: the action is the step number, the next state is the state plus one.

    Records every call; initial states are a fixed nonzero value so they are easy to spot.
    """

    INITIAL = 7.0

    def __init__(self, continuous: bool = False) -> None:
        super().__init__()
        self.continuous = continuous
        self.predictions: List[Dict[str, np.ndarray]] = []
        self.stored: List[dict] = []
        self.learn_calls = 0
        self.initial_calls = 0

    def initial_states(self) -> Dict[str, np.ndarray]:
        self.initial_calls += 1
        return {"memory": np.full(2, self.INITIAL, np.float32)}

    def predict(self, inputs, states=None):
        self.predictions.append({"inputs": dict(inputs), "states": dict(states)})
        step = inputs["obs"][1]
        if self.continuous:
            action = np.array([np.float32(step) / 2.0 - 1.0], np.float32)  # -1, -0.5, 0, ...
        else:
            action = np.array([int(step) % 3], np.int64)
        return {"action": action}, {"memory": states["memory"] + 1.0}

    def store_data(self, inputs, actions, rewards, next_inputs, terminated, truncated, states=None, next_states=None):
        self.stored.append(
            dict(
                inputs=inputs,
                actions=actions,
                rewards=rewards,
                next_inputs=next_inputs,
                terminated=terminated,
                truncated=truncated,
                states=states,
                next_states=next_states,
            )
        )

    def learn(self):
        self.learn_calls += 1
        return None


def play(episodes: int, length: int, continuous: bool = False, seed: int = 0):
    space = gym.spaces.Box(-3.0, 3.0, (1,), np.float32) if continuous else gym.spaces.Discrete(3)
    env = StepEnv(length, space)
    agent = GymAgent(env, seed=seed)
    helper = RecordingHelper(continuous)
    agent.helpers["RL"] = helper
    results = []
    for _ in range(episodes):
        results.append(agent.run_one_episode())
        agent.episode += 1  # the Manager's loop counts episodes
    return env, agent, helper, results


def test_run_one_episode_stores_every_transition_with_chained_inputs_and_states() -> None:
    length = 4
    env, agent, helper, results = play(episodes=3, length=length)
    assert len(helper.stored) == 3 * length
    assert helper.learn_calls == 3 * length
    assert helper.initial_calls == 3
    assert results == [{"reward": 10.0, "steps": 4}] * 3
    assert agent.total_steps == 12
    for episode in range(3):
        rows = helper.stored[episode * length : (episode + 1) * length]
        # Each episode starts from the helper's initial states and the reset observation.
        np.testing.assert_array_equal(rows[0]["states"]["memory"], [RecordingHelper.INITIAL] * 2)
        np.testing.assert_array_equal(rows[0]["inputs"]["obs"], [episode, 0.0])
        for step, row in enumerate(rows):
            assert row["inputs"]["obs"].dtype == np.float32
            np.testing.assert_array_equal(row["inputs"]["obs"], [episode, step])
            np.testing.assert_array_equal(row["next_inputs"]["obs"], [episode, step + 1])
            np.testing.assert_array_equal(row["states"]["memory"], [RecordingHelper.INITIAL + step] * 2)
            np.testing.assert_array_equal(row["next_states"]["memory"], [RecordingHelper.INITIAL + step + 1] * 2)
            assert row["rewards"] == float(step + 1)
            np.testing.assert_array_equal(row["actions"]["action"], [step % 3])
            last = step == length - 1
            assert row["terminated"] == (last and episode % 2 == 0)
            assert row["truncated"] == (last and episode % 2 == 1)
        for row, following in zip(rows, rows[1:]):
            np.testing.assert_array_equal(following["inputs"]["obs"], row["next_inputs"]["obs"])
            np.testing.assert_array_equal(following["states"]["memory"], row["next_states"]["memory"])


def test_a_step_is_counted_once_its_transition_is_handed_over() -> None:
    """A step budget reached by a step's count finds that step's segment already queued, so the drain
    before the stop learns it (counted first, an agent could end the run with its last segment unsent)."""
    env = StepEnv(3, gym.spaces.Discrete(3))
    agent = GymAgent(env, seed=0)
    seen: List[int] = []

    class CountingHelper(RecordingHelper):
        def learn(self):
            seen.append(agent.total_steps)
            return super().learn()

    agent.helpers["RL"] = CountingHelper()
    agent.run_one_episode()
    assert seen == [0, 1, 2] and agent.total_steps == 3


def test_a_step_is_counted_when_a_stop_ends_its_training_request() -> None:
    """``learn`` may park the agent on a training request (the last step of an RLX episode, whose
    ``done`` its client already has); a robot stopped then must count that step in its checkpoint."""
    env = StepEnv(3, gym.spaces.Discrete(3))
    agent = GymAgent(env, seed=0)

    class StoppedHelper(RecordingHelper):
        def learn(self):
            if len(self.stored) == 3:
                raise StoppedError("the robot is stopped")
            return super().learn()

    agent.helpers["RL"] = StoppedHelper()
    with pytest.raises(StoppedError):
        agent.run_one_episode()
    assert agent.total_steps == 3


def test_run_one_episode_predicts_from_the_stored_inputs_and_states() -> None:
    _, _, helper, _ = play(episodes=2, length=3)
    assert len(helper.predictions) == len(helper.stored) == 6
    for prediction, row in zip(helper.predictions, helper.stored):
        np.testing.assert_array_equal(prediction["inputs"]["obs"], row["inputs"]["obs"])
        np.testing.assert_array_equal(prediction["states"]["memory"], row["states"]["memory"])


def test_discrete_actions_reach_the_env_as_ints() -> None:
    env, _, _, _ = play(episodes=1, length=5)
    assert env.actions == [0, 1, 2, 0, 1]
    assert all(type(a) is int for a in env.actions)


def test_continuous_actions_reach_the_env_scaled_to_its_bounds() -> None:
    env, _, helper, _ = play(episodes=1, length=5, continuous=True)
    # The policy's actions are -1, -0.5, 0, 0.5, 1 (in [-1, 1]); the Box is [-3, 3].
    np.testing.assert_allclose(np.concatenate(env.actions), [-3.0, -1.5, 0.0, 1.5, 3.0])
    # The helper stores the policy's own action, not the env's.
    np.testing.assert_allclose([r["actions"]["action"][0] for r in helper.stored], [-1.0, -0.5, 0.0, 0.5, 1.0])


class OverriddenEnv(StepEnv):
    """A StepEnv that takes action 2 on its third step whatever it was told, and says so in its info."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, ({"action_taken": 2} if self.t == 3 else info)


def test_the_action_an_env_says_it_took_is_the_one_stored() -> None:
    env = OverriddenEnv(4, gym.spaces.Discrete(3))
    agent = GymAgent(env, seed=0)
    helper = RecordingHelper()
    helper.predict = lambda inputs, states=None: ({"action": np.array([1], np.int64)}, {"memory": states["memory"]})
    agent.helpers["RL"] = helper
    agent.run_one_episode()
    assert env.actions == [1, 1, 1, 1]  # told 1 every step
    assert [int(r["actions"]["action"][0]) for r in helper.stored] == [1, 1, 2, 1]  # took 2 at step 3


def test_only_the_first_reset_is_seeded() -> None:
    env, _, _, _ = play(episodes=3, length=2, seed=42)
    assert env.reset_seeds == [42, None, None]


def test_act_can_be_overridden_to_explore() -> None:
    class Always2(GymAgent):
        def act(self, inputs, states):
            actions, next_states = super().act(inputs, states)
            return {"action": np.array([2], np.int64)}, next_states

    env = StepEnv(3, gym.spaces.Discrete(3))
    agent = Always2(env)
    helper = RecordingHelper()
    agent.helpers["RL"] = helper
    agent.run_one_episode()
    assert env.actions == [2, 2, 2]
    assert [int(r["actions"]["action"][0]) for r in helper.stored] == [2, 2, 2]
    np.testing.assert_array_equal(helper.stored[-1]["next_states"]["memory"], [RecordingHelper.INITIAL + 3] * 2)


def test_gym_agent_with_an_unbounded_action_space_raises_at_construction() -> None:
    with pytest.raises(ValueError, match="bounded"):
        GymAgent(StepEnv(2, gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)))
