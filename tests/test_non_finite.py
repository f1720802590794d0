"""Finite data or a clear error, in the agent that sent it; non-finite updates skipped.

An agent's NaN or infinite observation or reward, or its out-of-range discrete action, fails that
agent alone, in every placement, and reaches no batch, normalizer or weight; an update whose loss
or gradient is not finite is skipped and counted, and many in a row stop the run.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Tuple

import gymnasium as gym
import numpy as np
import paddle
import pytest

import parl
from parl.algorithms import DQN
from parl.core.specs import Spec, check_sample, normalize_specs
from parl.experiment.train.metrics import task_values
from parl.models import MLPQModel
from parl.serving.skipped_updates import NonFiniteUpdatesError
from parl.serving.stats import WrapperStats
from parl.utils import GymAgent

from toys import (
    WAIT,
    CountEnv,
    EchoAlgorithm,
    EchoModel,
    RecordingCommunicator,
    ReportingEchoAgent,
    Robots,
    echo_batch,
    echo_obs,
)

NAN, INF = float("nan"), float("inf")


def all_weights_finite(task: parl.ComputationTask) -> bool:
    """Every parameter of every model the task's algorithm holds, and its input statistics, finite."""
    arrays = [v for weights in task.algorithm_weights().values() for v in _arrays(weights)]
    return bool(arrays) and all(np.isfinite(a).all() for a in arrays)


def _arrays(tree: object):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _arrays(value)
    else:
        yield np.asarray(tree)


# -- checks at the door, in every placement ------------------------------------------------------


class BadRewardEnv(CountEnv):
    """A CountEnv whose reward at step 2 of its first episode is NaN."""

    def step(self, action: int):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, NAN if (self.episode, self.t) == (0, 2) else reward, terminated, truncated, info


class BadObsEnv(CountEnv):
    """A CountEnv whose observation after step 2 of its first episode holds NaN."""

    def step(self, action: int):
        obs, reward, terminated, truncated, info = super().step(action)
        if (self.episode, self.t) == (0, 2):
            obs[0] = NAN
        return obs, reward, terminated, truncated, info


def _inf_at_step_3(inputs: dict, episode: int) -> dict:
    obs = inputs["obs"]
    return {"obs": np.array([obs[0], INF], np.float32)} if obs[0] == 3 else inputs


#: How agent 0 goes wrong, and what its error says.
BAD_DATA: Dict[str, Tuple[Callable[[], ReportingEchoAgent], str]] = {
    "nan-observation": (
        lambda: ReportingEchoAgent(BadObsEnv(0), num_games=2),
        "store_data: task 'T' next input 'obs' holds nan at index (0,) (not finite)",
    ),
    "inf-observation": (
        lambda: ReportingEchoAgent(CountEnv(0), num_games=2, corrupt=_inf_at_step_3),
        "task 'T' input 'obs' holds inf at index (1,) (not finite)",
    ),
    "nan-reward": (
        lambda: ReportingEchoAgent(BadRewardEnv(0), num_games=2),
        "store_data: task 'T' reward 'reward' is nan (not finite)",
    ),
}


@pytest.mark.parametrize("bad", list(BAD_DATA))
def test_a_non_finite_value_fails_only_its_agent_and_reaches_no_weight(robot: Robots, bad: str) -> None:
    make_bad, message = BAD_DATA[bad]
    manager = robot(normalize_inputs=True)
    agents = [make_bad()] + [ReportingEchoAgent(CountEnv(code), num_games=2) for code in (1, 2, 3)]
    for agent in agents:
        manager.add_agent(agent, {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.start()
    episodes = manager.join(timeout=WAIT)
    assert [(e.agent_id, e.episode) for e in manager.errors] == [(0, 0)]
    assert isinstance(manager.errors[0].original, ValueError) and message in str(manager.errors[0])
    played = sorted(e["agent_id"] for e in episodes)
    assert played == [1, 1, 2, 2, 3, 3]
    task = manager.tasks["T"]
    assert task.update_steps > 0 and task.skipped_updates == 0
    assert all_weights_finite(task)
    seen = task.algorithm.prediction_batches + task.algorithm.learn_batches
    assert all(np.isfinite(batch).all() for batch in seen)


class BadActionHelper(parl.OnPolicyHelper):
    """Stores ``action`` in place of the predicted one at its agent's third step."""

    def __init__(self, action: int) -> None:
        super().__init__(sample_interval=2)
        self.action, self.steps = action, 0

    def store_data(self, inputs, actions, rewards, next_inputs, terminated, truncated, states=None, next_states=None):
        self.steps += 1
        if self.steps == 3:
            actions = {"action": np.array([self.action], np.int64)}
        super().store_data(inputs, actions, rewards, next_inputs, terminated, truncated, states, next_states)


RANGED_ACTIONS = [("action", dict(shape=[1], dtype="int64", range=[0, 4000]))]


@pytest.mark.parametrize("action, shown", [(-1, "-1"), (4000, "4000")])
def test_a_stored_action_outside_its_range_fails_only_its_agent(action: int, shown: str) -> None:
    settings = parl.TaskSettings(lambda: EchoAlgorithm(lambda: EchoModel(action_specs=RANGED_ACTIONS)))
    manager = parl.Manager({"T": settings}, thread_placement="os")
    try:
        for code in range(4):
            helper = BadActionHelper(action) if code == 0 else parl.OnPolicyHelper(sample_interval=2)
            manager.add_agent(ReportingEchoAgent(CountEnv(code), num_games=2), {"T": helper})
        manager.start()
        episodes = manager.join(timeout=WAIT)
    finally:
        manager.stop()
    assert [(e.agent_id, e.episode) for e in manager.errors] == [(0, 0)]
    expected = f"store_data: task 'T' action 'action' is {shown} (outside its range [0, 4000))"
    assert expected in str(manager.errors[0])
    assert sorted(e["agent_id"] for e in episodes) == [1, 1, 2, 2, 3, 3]
    learned = np.concatenate(manager.tasks["T"].algorithm.learn_batches)
    assert set(learned[learned[:, 0] < 1000, 0]) == {0.0, 1.0}  # agent 0's steps before the refused one


def test_specs_declare_integer_ranges_and_samples_are_checked_against_them() -> None:
    (spec,) = normalize_specs(RANGED_ACTIONS, "M")
    assert spec.value_range == (0, 4000)
    assert check_sample(spec, 3999, "action")[0] == 3999
    with pytest.raises(ValueError, match=r"action 'action' is 4000 \(outside its range \[0, 4000\)\)"):
        check_sample(spec, 4000, "action")
    with pytest.raises(ValueError, match="declares a range but its dtype is float32"):
        normalize_specs([("x", dict(shape=[1], range=[0, 2]))], "M")
    with pytest.raises(ValueError, match=r"range must be \[low, high\] with ints low < high, got \[2, 2\]"):
        normalize_specs([("x", dict(shape=[1], dtype="int64", range=[2, 2]))], "M")
    grid = Spec("grid", [2, 3], "float32")
    values = np.zeros((2, 3), np.float32)
    values[1, 2] = -INF
    with pytest.raises(ValueError, match=r"input 'grid' holds -inf at index \(1, 2\) \(not finite\)"):
        check_sample(grid, values, "input")
    big = np.full((2, 3), 3e38, np.float32)  # finite, though its sum overflows
    assert check_sample(grid, big, "input") is big
    assert check_sample(Spec("frame", [2], "uint8"), np.array([0, 255], np.uint8), "input")[1] == 255


# -- DQN on CartPole with one NaN observation per environment ----------------------------------


class OneNaNObservation(gym.Wrapper):
    """Returns NaN in place of the observation of the ``at``-th step of the environment's life."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            obs = np.full_like(obs, NAN)
        return obs, reward, terminated, truncated, info


def test_dqn_fed_a_nan_observation_per_environment_keeps_finite_weights() -> None:
    algorithm_func = parl.create_algorithm_func(
        MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(16,)), DQN, dict(target_update_interval=10)
    )
    manager = parl.Manager({"RL": parl.TaskSettings(algorithm_func, normalize_inputs=True)}, thread_placement="os")
    try:
        for seed in range(2):
            env = OneNaNObservation(gym.make("CartPole-v1"), at=80 + 20 * seed)
            helper = parl.ExpReplayHelper(capacity=500, batch_size=16, warmup_steps=32, seed=seed)
            manager.add_agent(GymAgent(env, seed=seed), {"RL": helper})
        manager.start()
        manager.join(timeout=60)
    finally:
        manager.stop()
    assert sorted(e.agent_id for e in manager.errors) == [0, 1]
    assert all("next input 'obs' holds nan at index (0,)" in str(e) for e in manager.errors)
    task = manager.tasks["RL"]
    assert task.update_steps > 40 and task.skipped_updates == 0
    assert set(task.algorithm_weights()) >= {"model", "target_model"}
    assert all_weights_finite(task)


# -- non-finite updates skipped ----------------------------------------------------------------


def nan_reward_batch(rows: int = 4) -> parl.Transition:
    batch = echo_batch(1, rows=rows)._replace(sequence_lengths=None)
    return batch._replace(rewards={"reward": np.full((rows, 1), NAN, np.float32)})


class NaNGradient(EchoAlgorithm):
    """A finite loss (0) whose gradient is NaN: the square root's slope at 0 times 0."""

    def learn(self, batch):
        value = self.model.value(batch.inputs)
        return {"loss": paddle.sqrt(((value - value.detach()) ** 2).sum())}


def weights_and_optimizer(task: parl.ComputationTask) -> Dict[str, np.ndarray]:
    state = {f"w/{k}": v.copy() for k, v in _flat(task.algorithm_weights()).items()}
    return {**state, **{f"o/{k}": np.copy(v) for k, v in task._optimizer.state_dict().items()}}


def _flat(tree: dict, prefix: str = "") -> Dict[str, np.ndarray]:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[prefix + key] = np.asarray(value)
    return out


@pytest.mark.parametrize("algorithm, what", [(EchoAlgorithm, "loss (nan)"), (NaNGradient, "gradient")])
def test_a_non_finite_update_is_skipped_counted_and_changes_nothing(algorithm, what, caplog) -> None:
    task = parl.ComputationTask("T", algorithm())
    task.learn(echo_batch(1, rows=4)._replace(sequence_lengths=None))  # applied (NaNGradient: skipped)
    steps, before = task.update_steps, weights_and_optimizer(task)
    caplog.clear()
    batch = nan_reward_batch() if algorithm is EchoAlgorithm else echo_batch(2, rows=4)
    with caplog.at_level(logging.WARNING, logger="parl"):
        costs = [task.learn(batch) for _ in range(2)]
    assert all(c["skipped_updates"] == 1.0 and "td_error" not in c for c in costs)
    assert task.skipped_updates == (2 if algorithm is EchoAlgorithm else 3)
    after = weights_and_optimizer(task)
    assert after.keys() == before.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    assert task.update_steps == steps and all_weights_finite(task)
    warnings = [r.getMessage() for r in caplog.records if "skipped an update" in r.getMessage()]
    assert len(warnings) == (1 if algorithm is EchoAlgorithm else 0)  # one a minute at most
    assert all(f"non-finite {what}" in w for w in warnings)


def test_max_skipped_updates_in_a_row_raise_and_an_applied_update_resets_the_count() -> None:
    task = parl.ComputationTask("T", EchoAlgorithm(), max_skipped_updates=3)
    good = echo_batch(1, rows=4)._replace(sequence_lengths=None)
    for batch in (nan_reward_batch(), nan_reward_batch(), good, nan_reward_batch(), nan_reward_batch()):
        task.learn(batch)
    assert task.skipped_updates == 4 and task.update_steps == 1
    with pytest.raises(NonFiniteUpdatesError, match=r"task 'T': 3 updates in a row .* max_skipped_updates=3"):
        task.learn(nan_reward_batch())
    assert all_weights_finite(task)
    with pytest.raises(ValueError, match="max_skipped_updates must be"):
        parl.ComputationTask("T", EchoAlgorithm(), max_skipped_updates=0)


def test_skipped_updates_reach_the_metrics_as_a_count() -> None:
    stats = WrapperStats()
    stats.record_update(4, {"loss": 1.0}, (0.0, 0, 0), 0.1)
    first = stats.snapshot()
    for costs in ({"loss": NAN, "skipped_updates": 1.0}, {"loss": 1.0}, {"loss": NAN, "skipped_updates": 2.0}):
        stats.record_update(4, costs, (0.0, 0, 0), 0.1)
    second = stats.snapshot()
    assert task_values("T", first, second, 1.0)["task/T/skipped_updates"] == 3.0
    stats.record_update(4, {"loss": 1.0}, (0.0, 0, 0), 0.1)
    assert task_values("T", second, stats.snapshot(), 1.0)["task/T/skipped_updates"] == 0.0


class SkippingCommunicator(RecordingCommunicator):
    """Answers every update as one the task skipped."""

    def learn(self, batch):
        self.batches.append(batch)
        return {"loss": NAN, "skipped_updates": 1.0}


def test_prioritized_replay_keeps_the_priorities_of_a_skipped_update() -> None:
    helper = parl.ExpReplayHelper(capacity=8, batch_size=2, warmup_steps=4, seed=0, prioritized=True)
    helper.bind(SkippingCommunicator(EchoModel()))
    for step in range(4):
        obs = echo_obs(0, step)
        helper.store_data({"obs": obs}, {"action": np.array([step])}, 1.0, {"obs": obs + 1}, False, False)
    priorities = helper.buffer._tree.get(np.arange(4)).copy()
    assert helper.learn()["skipped_updates"] == 1.0
    assert np.array_equal(helper.buffer._tree.get(np.arange(4)), priorities)
