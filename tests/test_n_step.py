"""n-step returns: the accumulator on hand-computed episodes, the helper's batches, and DQN's gamma ** steps."""

from __future__ import annotations

from typing import List

import numpy as np
import paddle
import pytest

import parl
from parl.algorithms import DQN
from parl.experience.n_step import NStepAccumulator
from parl.models import MLPQModel

from toys import EchoModel, RecordingCommunicator, simple_batch

GAMMA = 0.5  # powers of 1/2 keep the hand-computed sums exact


def step(t: int, reward: float, *, terminated: bool = False) -> parl.Transition:
    """The 1-step transition of step ``t``: obs t -> t + 1, action t, state -t -> -(t + 1)."""
    return parl.Transition(
        inputs={"obs": np.array([t, 0], np.float32)},
        next_inputs={"obs": np.array([t + 1, 0], np.float32)},
        states={"h": np.array([-t], np.float32)},
        next_states={"h": np.array([-(t + 1)], np.float32)},
        actions={"action": np.array([t], np.int64)},
        rewards={"reward": np.array([reward], np.float32)},
        next_episode_end=np.array([1.0 if terminated else 0.0], np.float32),
    )


def play(accumulator: NStepAccumulator, rewards: List[float], *, terminated: bool, start: int = 0) -> List[list]:
    """Feed one episode; the n-step transitions emitted after each step."""
    emitted = []
    last = len(rewards) - 1
    for k, reward in enumerate(rewards):
        t = start + k
        emitted.append(accumulator.add(step(t, reward, terminated=terminated and k == last), k == last))
    return emitted


def summary(transition: parl.Transition) -> tuple:
    """(first step, last step + 1, reward, bootstrap steps, episode end) of an n-step transition."""
    return (
        int(transition.inputs["obs"][0]),
        int(transition.next_inputs["obs"][0]),
        float(transition.rewards["reward"][0]),
        float(transition.bootstrap_steps[0]),
        float(transition.next_episode_end[0]),
    )


REWARDS = [1.0, 2.0, 4.0, 8.0, 16.0]
# n = 3, gamma = 1/2: r_t + r_{t+1} / 2 + r_{t+2} / 4, shorter at the end of the episode.
EXPECTED_RETURNS = [1 + 1 + 1, 2 + 2 + 2, 4 + 4 + 4, 8 + 8, 16]


@pytest.mark.parametrize("terminated", [True, False], ids=["terminated", "truncated"])
def test_an_episode_becomes_n_step_transitions_flushed_with_shorter_spans_at_its_end(terminated) -> None:
    emitted = play(NStepAccumulator(3, gamma=GAMMA), REWARDS, terminated=terminated)
    # Nothing until n steps are known; then one per step; the rest at the episode's end.
    assert [len(e) for e in emitted] == [0, 0, 1, 1, 3]
    transitions = [t for e in emitted for t in e]
    end = 1.0 if terminated else 0.0
    assert [summary(t) for t in transitions] == [
        (0, 3, EXPECTED_RETURNS[0], 3.0, 0.0),
        (1, 4, EXPECTED_RETURNS[1], 3.0, 0.0),
        # The three flushed transitions all end at the episode's last step: its end flag is theirs.
        (2, 5, EXPECTED_RETURNS[2], 3.0, end),
        (3, 5, EXPECTED_RETURNS[3], 2.0, end),
        (4, 5, EXPECTED_RETURNS[4], 1.0, end),
    ]


def test_states_and_actions_come_from_the_first_step_next_states_from_the_last() -> None:
    transitions = [t for e in play(NStepAccumulator(2, gamma=GAMMA), [1.0, 1.0, 1.0], terminated=True) for t in e]
    for t, first, last in zip(transitions, [0, 1, 2], [1, 2, 2]):
        assert t.actions["action"].tolist() == [first] and t.actions["action"].dtype == np.int64
        assert t.states["h"].tolist() == [-first]
        assert t.next_states["h"].tolist() == [-(last + 1)]
        assert t.bootstrap_steps.dtype == np.float32 and t.bootstrap_steps.shape == (1,)


@pytest.mark.parametrize("terminated", [True, False], ids=["terminated", "truncated"])
def test_an_episode_shorter_than_n_is_flushed_whole_at_its_end(terminated) -> None:
    emitted = play(NStepAccumulator(5, gamma=GAMMA), [4.0, 8.0], terminated=terminated)
    assert [len(e) for e in emitted] == [0, 2]
    end = 1.0 if terminated else 0.0
    assert [summary(t) for t in emitted[1]] == [(0, 2, 4 + 4, 2.0, end), (1, 2, 8.0, 1.0, end)]


def test_episodes_do_not_mix() -> None:
    accumulator = NStepAccumulator(3, gamma=GAMMA)
    first = play(accumulator, [1.0, 2.0], terminated=False)
    assert len(accumulator) == 0  # the truncation flushed everything
    second = play(accumulator, [4.0, 8.0, 16.0, 32.0], terminated=True, start=100)
    assert [summary(t) for t in first[1]] == [(0, 2, 2.0, 2.0, 0.0), (1, 2, 2.0, 1.0, 0.0)]
    assert [summary(t) for e in second for t in e] == [
        (100, 103, 4 + 4 + 4, 3.0, 0.0),
        (101, 104, 8 + 8 + 8, 3.0, 1.0),
        (102, 104, 16 + 16, 2.0, 1.0),
        (103, 104, 32.0, 1.0, 1.0),
    ]


def test_one_step_passes_transitions_through() -> None:
    emitted = play(NStepAccumulator(1, gamma=GAMMA), [3.0, 5.0], terminated=True)
    assert [[summary(t) for t in e] for e in emitted] == [[(0, 1, 3.0, 1.0, 0.0)], [(1, 2, 5.0, 1.0, 1.0)]]


def test_every_reward_spec_is_summed_on_its_own_in_its_dtype() -> None:
    accumulator = NStepAccumulator(2, gamma=0.9)
    out = []
    for t, (a, b) in enumerate([(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)]):
        transition = step(t, 0.0)._replace(rewards={"a": np.array([a], np.float32), "b": np.array([b, -b], np.float64)})
        out += accumulator.add(transition, t == 2)
    assert [t.rewards["a"].dtype for t in out] == [np.float32] * 3
    np.testing.assert_allclose([t.rewards["a"][0] for t in out], [1 + 0.9 * 2, 2 + 0.9 * 3, 3], rtol=1e-6)
    np.testing.assert_allclose([t.rewards["b"] for t in out], [[28, -28], [47, -47], [30, -30]], rtol=1e-12)


def test_the_accumulator_keeps_copies_of_what_it_is_given() -> None:
    accumulator = NStepAccumulator(2, gamma=GAMMA)
    transition = step(0, 1.0)
    accumulator.add(transition, False)
    for field in ("inputs", "next_inputs", "states", "actions", "rewards"):
        for value in getattr(transition, field).values():
            value[...] = 99  # an agent reusing its arrays in place
    (out,) = accumulator.add(step(1, 2.0), False)
    assert summary(out) == (0, 2, 1.0 + 1.0, 2.0, 0.0)
    assert out.actions["action"].tolist() == [0] and out.states["h"].tolist() == [0]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(n=0, gamma=0.9), ["n_step", "0"]),
        (dict(n=2.5, gamma=0.9), ["n_step", "2.5"]),
        (dict(n=2, gamma=1.5), ["gamma", "1.5"]),
    ],
)
def test_bad_settings_raise(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        NStepAccumulator(kwargs["n"], gamma=kwargs["gamma"])
    for word in words:
        assert word in str(info.value)


# -- through the helper ------------------------------------------------------------------


def test_the_helper_stores_n_step_transitions_and_sends_their_bootstrap_steps() -> None:
    helper = parl.ExpReplayHelper(capacity=100, batch_size=200, warmup_steps=1, n_step=3, gamma=GAMMA, seed=0)
    comm = RecordingCommunicator(EchoModel())
    helper.bind(comm)
    for t, reward in enumerate(REWARDS):
        obs = np.array([t, 0], np.float32)
        last = t == len(REWARDS) - 1
        helper.store_data({"obs": obs}, {"action": np.array([t])}, reward, {"obs": obs + 1}, last, False)
        assert len(helper.buffer) == [0, 0, 1, 2, 5][t]
    assert helper.learn() is not None
    batch = comm.batches[0]
    first = batch.inputs["obs"][:, 0].astype(int)
    assert set(first) == {0, 1, 2, 3, 4}
    np.testing.assert_array_equal(batch.rewards["reward"][:, 0], np.array(EXPECTED_RETURNS)[first])
    np.testing.assert_array_equal(batch.bootstrap_steps[:, 0], np.array([3, 3, 3, 2, 1])[first])
    np.testing.assert_array_equal(batch.next_inputs["obs"][:, 0], np.array([3, 4, 5, 5, 5])[first])
    np.testing.assert_array_equal(batch.next_episode_end[:, 0], np.array([0, 0, 1, 1, 1])[first])
    assert batch.bootstrap_steps.shape == (200, 1) and batch.bootstrap_steps.dtype == np.float32
    assert batch.weights is None


def test_a_one_step_helper_sends_no_bootstrap_steps() -> None:
    helper = parl.ExpReplayHelper(batch_size=4, warmup_steps=1)
    comm = RecordingCommunicator(EchoModel())
    helper.bind(comm)
    helper.store_data({"obs": np.zeros(2)}, {"action": np.array([0])}, 1.0, {"obs": np.ones(2)}, False, False)
    helper.learn()
    assert comm.batches[0].bootstrap_steps is None and comm.batches[0].weights is None


# -- DQN discounts by the steps each row spans ------------------------------------------

ONLINE = {"q.w": np.array([[1.0, -1.0], [0.5, 2.0]], np.float32), "q.b": np.array([0.0, 0.1], np.float32)}
TARGET = {"q.w": np.array([[0.2, 0.8], [-1.0, 0.3]], np.float32), "q.b": np.array([0.5, -0.5], np.float32)}


def test_dqn_discounts_each_row_by_gamma_to_the_power_of_its_bootstrap_steps() -> None:
    gamma = 0.9
    dqn = DQN(lambda: MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=()), gamma=gamma, loss="mse")
    dqn.model.set_weights(ONLINE)
    dqn.target_model.set_weights(TARGET)
    obs = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    next_obs = np.array([[1.0, 1.0], [2.0, -1.0], [0.5, 0.5]], np.float32)
    actions = np.array([[0], [1], [1]], np.int64)
    rewards = np.array([[1.0], [-0.5], [2.0]], np.float32)
    ends = np.zeros((3, 1), np.float32)
    steps = np.array([[3.0], [1.0], [3.0]], np.float32)
    costs = dqn.learn(simple_batch(obs, actions, rewards, next_obs, ends, bootstrap_steps=steps).to_tensors())

    def q(weights, x):
        return x @ weights["q.w"] + weights["q.b"]

    next_action = q(ONLINE, next_obs).argmax(axis=1)[:, None]  # Double DQN
    next_value = np.take_along_axis(q(TARGET, next_obs), next_action, axis=1)
    q_taken = np.take_along_axis(q(ONLINE, obs), actions, axis=1)
    expected = rewards + gamma**steps * next_value - q_taken
    np.testing.assert_allclose(costs["td_error"].numpy(), expected, rtol=1e-5, atol=1e-6)
    one_step = rewards + gamma * next_value - q_taken
    assert np.abs(expected - one_step)[[0, 2]].min() > 0.01  # gamma ** 3 is told apart from gamma
    assert float(costs["loss"]) == pytest.approx(float(np.mean(expected**2)), rel=1e-5)


# -- end to end: helper, task and DQN reach the values the returns define -------------------------


class DirectCommunicator(RecordingCommunicator):
    """Trains a task in the caller's thread: the helper's batches go straight to ``task.learn``."""

    def __init__(self, task: parl.ComputationTask) -> None:
        super().__init__(task.algorithm.model)
        self.task = task

    def learn(self, batch):
        return self.task.learn(batch)


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("ending", ["terminated", "truncated"])
def test_n_step_dqn_through_the_helper_learns_the_true_values(ending, prioritized) -> None:
    """Reward 1 per step, one action, gamma 0.9.

    terminated: a chain of 6 states (one-hot) that ends at its last step: Q(t) = sum_{k < 6 - t} 0.9^k.
    truncated: one state forever, cut every 5 steps: Q = 1 / (1 - 0.9) = 10, as bootstrapping through
    the cut demands (treating the cut as an end would give a value near 4).
    """
    gamma, length = 0.9, 6 if ending == "terminated" else 5
    parl.seed_everything(0)
    obs_dim = length if ending == "terminated" else 1
    algorithm = DQN(
        lambda: MLPQModel(obs_dim=obs_dim, num_actions=1, hidden_sizes=()),
        gamma=gamma,
        learning_rate=0.05,
        target_update_interval=10,
        loss="mse",
    )
    task = parl.ComputationTask("RL", algorithm)
    helper = parl.ExpReplayHelper(
        capacity=1000, batch_size=32, warmup_steps=32, n_step=3, gamma=gamma, prioritized=prioritized, seed=0
    )
    helper.bind(DirectCommunicator(task))

    def obs(t: int) -> np.ndarray:
        return (
            np.eye(length, dtype=np.float32)[min(t, length - 1)] if ending == "terminated" else np.ones(1, np.float32)
        )

    for _ in range(600):  # episodes
        for t in range(length):
            over = t == length - 1
            helper.store_data(
                {"obs": obs(t)},
                {"action": np.array([0])},
                1.0,
                {"obs": obs(t + 1)},
                over and ending == "terminated",
                over and ending == "truncated",
            )
            helper.learn()
    states = np.stack([obs(t) for t in range(length)])
    with paddle.no_grad():
        q = algorithm.model.value({"obs": paddle.to_tensor(states)}).numpy()[:, 0]
    if ending == "terminated":
        expected = np.array([sum(gamma**k for k in range(length - t)) for t in range(length)])
    else:
        expected = np.full(length, 1.0 / (1.0 - gamma))
    np.testing.assert_allclose(q, expected, rtol=0.03)
