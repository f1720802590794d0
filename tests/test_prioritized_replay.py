"""Prioritized replay: priorities, sampling proportions, importance weights, beta annealing, and the helper
that updates priorities from the td_error of each update."""

from __future__ import annotations

import threading
from typing import Dict, List

import numpy as np
import pytest

import parl
from parl.algorithms import DQN
from parl.experience.prioritized_replay_buffer import PrioritizedReplayBuffer
from parl.models import MLPQModel

from toys import EchoModel, RecordingCommunicator, specs

INPUTS = specs(("obs", [2], "float32"))
ACTIONS = specs(("action", [1], "int64"))
REWARDS = specs(("reward", [1], "float32"))


def transition(i: int) -> parl.Transition:
    """Transition ``i``: every field carries ``i``, so sampled rows can be traced and checked whole."""
    return parl.Transition(
        inputs={"obs": np.array([i, 0], np.float32)},
        next_inputs={"obs": np.array([i, 1], np.float32)},
        states={},
        next_states={},
        actions={"action": np.array([i], np.int64)},
        rewards={"reward": np.array([-i], np.float32)},
        next_episode_end=np.array([float(i % 2)], np.float32),
    )


def make_buffer(capacity: int = 10, **kwargs) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(capacity, INPUTS, [], ACTIONS, REWARDS, **kwargs)


def filled(n: int, **kwargs) -> PrioritizedReplayBuffer:
    buffer = make_buffer(**{"capacity": n, **kwargs})
    for i in range(n):
        assert buffer.add(transition(i)) == i
    return buffer


def rows(batch: parl.Transition) -> np.ndarray:
    ids = batch.inputs["obs"][:, 0].astype(int)
    np.testing.assert_array_equal(batch.next_inputs["obs"][:, 0], ids)
    np.testing.assert_array_equal(batch.actions["action"][:, 0], ids)
    np.testing.assert_array_equal(batch.rewards["reward"][:, 0], -ids)
    np.testing.assert_array_equal(batch.next_episode_end[:, 0], ids % 2)
    return ids


def test_new_transitions_get_the_largest_priority_seen() -> None:
    buffer = filled(3, alpha=0.5, epsilon=0.01)
    np.testing.assert_allclose(buffer.priorities(np.arange(3)), [1.0, 1.0, 1.0])  # the initial maximum is 1
    buffer.update_priorities(np.array([0, 1]), np.array([3.99, -0.19]))  # |td| + epsilon: 4.0 and 0.2
    np.testing.assert_allclose(buffer.priorities(np.arange(3)), [2.0, np.sqrt(0.2), 1.0])
    buffer.add(transition(3))  # overwrites slot 0 (capacity 3) with the largest p so far, 4.0
    np.testing.assert_allclose(buffer.priorities(np.arange(3)), [2.0, np.sqrt(0.2), 1.0])
    buffer.update_priorities(np.array([0]), np.array([0.0]))
    np.testing.assert_allclose(buffer.priorities(np.array([0])), [np.sqrt(0.01)])
    buffer.add(transition(4))  # the maximum stays the largest ever seen
    np.testing.assert_allclose(buffer.priorities(np.array([1])), [2.0])


def test_sampling_follows_p_to_the_alpha_and_returns_whole_rows_with_their_slots() -> None:
    alpha = 0.6
    buffer = filled(6, alpha=alpha, epsilon=1e-6)
    td = np.array([0.0, 1.0, 2.0, 4.0, 8.0, 0.5])
    buffer.update_priorities(np.arange(6), td)
    expected = (np.abs(td) + 1e-6) ** alpha
    expected /= expected.sum()
    rng = np.random.default_rng(0)
    counts = np.zeros(6)
    draws = 0
    for _ in range(1000):
        batch, slots = buffer.sample(64, rng)
        np.testing.assert_array_equal(rows(batch), slots)  # slots name the rows drawn
        counts += np.bincount(slots, minlength=6)
        draws += 64
    sigma = np.sqrt(draws * expected * (1 - expected))
    assert np.all(np.abs(counts - draws * expected) <= 5 * sigma + 1), (counts / draws, expected)
    assert counts[0] < 0.001 * draws  # |td| = 0: only epsilon left


def test_weights_are_n_p_to_the_minus_beta_normalized_by_the_largest_over_the_buffer() -> None:
    buffer = filled(5, alpha=0.7, beta_start=0.5, beta_steps=0)  # beta = 1 from the start
    td = np.array([0.1, 3.0, 0.5, 2.0, 1.0])
    buffer.update_priorities(np.arange(5), td)
    assert buffer.beta == 1.0
    p = (np.abs(td) + 1e-6) ** 0.7
    probability = p / p.sum()
    weight = (5 * probability) ** -1.0
    reference = weight / weight.max()  # the maximum over all stored transitions, not over the batch
    batch, slots = buffer.sample(4, np.random.default_rng(1))
    assert batch.weights.shape == (4, 1) and batch.weights.dtype == np.float32
    np.testing.assert_allclose(batch.weights[:, 0], reference[slots], rtol=1e-5)


def test_beta_anneals_linearly_to_one_over_beta_steps_adds() -> None:
    buffer = make_buffer(capacity=4, beta_start=0.4, beta_steps=10)
    assert buffer.beta == pytest.approx(0.4)
    for i in range(5):
        buffer.add(transition(i))
    assert buffer.beta == pytest.approx(0.7)  # 5 of 10 steps; the ring wrapping does not matter
    buffer.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    batch, slots = buffer.sample(8, np.random.default_rng(0))
    p = (np.array([1.0, 2.0, 3.0, 4.0]) + 1e-6) ** 0.6
    np.testing.assert_allclose(batch.weights[:, 0], (p[slots] / p.min()) ** -0.7, rtol=1e-5)
    for i in range(5, 30):
        buffer.add(transition(i))
    assert buffer.beta == 1.0


def test_alpha_zero_samples_uniformly_with_unit_weights() -> None:
    buffer = filled(4, alpha=0.0)
    buffer.update_priorities(np.arange(4), np.array([0.0, 10.0, 100.0, 1000.0]))
    counts = np.zeros(4)
    rng = np.random.default_rng(3)
    for _ in range(500):
        batch, slots = buffer.sample(16, rng)
        np.testing.assert_array_equal(batch.weights, np.ones((16, 1), np.float32))
        counts += np.bincount(slots, minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), 0.25, atol=0.02)


def test_only_stored_transitions_are_drawn() -> None:
    buffer = make_buffer(capacity=100)
    for i in range(3):
        buffer.add(transition(i))
    _, slots = buffer.sample(300, np.random.default_rng(0))
    assert set(slots) == {0, 1, 2}


def test_bootstrap_steps_are_stored_and_returned() -> None:
    buffer = make_buffer(capacity=4, bootstrap_steps=True)
    for i in range(3):
        buffer.add(transition(i)._replace(bootstrap_steps=np.array([i + 1], np.float32)))
    batch, slots = buffer.sample(20, np.random.default_rng(0))
    np.testing.assert_array_equal(batch.bootstrap_steps[:, 0], slots + 1)


def test_sampling_an_empty_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty replay buffer"):
        make_buffer().sample(2, np.random.default_rng(0))


@pytest.mark.parametrize(
    "slots, td, words",
    [
        (np.array([0, 1]), np.array([1.0]), ["2 slots", "1 TD errors"]),
        (np.array([0]), np.array([np.inf]), ["finite", "inf"]),
        (np.array([0, 3]), np.array([1.0, 1.0]), ["[0, 3)", "3"]),
    ],
)
def test_bad_priority_updates_raise(slots, td, words) -> None:
    buffer = filled(3)
    with pytest.raises(ValueError) as info:
        buffer.update_priorities(slots, td)
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(alpha=1.5), ["alpha", "1.5"]),
        (dict(alpha=-0.1), ["alpha", "-0.1"]),
        (dict(beta_start=2.0), ["beta_start", "2.0"]),
        (dict(beta_steps=-1), ["beta_steps", "-1"]),
        (dict(beta_steps=0.5), ["beta_steps", "0.5"]),
        (dict(epsilon=0.0), ["epsilon", "0.0"]),
        (dict(capacity=0), ["capacity", "0"]),
    ],
)
def test_bad_buffer_settings_raise(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        make_buffer(**kwargs)
    for word in words:
        assert word in str(info.value), str(info.value)


# -- ExpReplayHelper end to end -----------------------------------------------------------


class TDCommunicator(RecordingCommunicator):
    """Records batches and answers with a chosen per-row td_error (as the wrapper sends this agent's rows)."""

    def __init__(self, td_of_rows=lambda batch: batch.inputs["obs"][:, 0] * 0.5) -> None:
        super().__init__(EchoModel())
        self.td_of_rows = td_of_rows
        self.replies: List[Dict[str, object]] = []

    def learn(self, batch):
        self.batches.append(batch)
        costs = {"loss": 0.0}
        td = self.td_of_rows(batch)
        if td is not None:
            costs["td_error"] = td
        self.replies.append(costs)
        return costs


def store(helper: parl.ExpReplayHelper, step: int, *, done: bool = False) -> None:
    obs = np.array([step, 0], np.float32)
    helper.store_data({"obs": obs}, {"action": np.array([step])}, 1.0, {"obs": obs + 1}, done, False)


def test_the_helper_sends_weights_and_updates_priorities_from_td_error() -> None:
    helper = parl.ExpReplayHelper(
        capacity=50, batch_size=16, warmup_steps=8, prioritized=True, alpha=0.5, priority_epsilon=0.01, seed=0
    )
    comm = TDCommunicator()
    helper.bind(comm)
    buffer = helper.buffer
    assert isinstance(buffer, PrioritizedReplayBuffer)
    for step in range(8):
        store(helper, step)
    np.testing.assert_allclose(buffer.priorities(np.arange(8)), 1.0)
    costs = helper.learn()
    assert costs is comm.replies[0]
    batch = comm.batches[0]
    assert batch.weights.shape == (16, 1) and batch.weights.dtype == np.float32
    np.testing.assert_array_equal(batch.weights, 1.0)  # equal priorities: equal weights
    sent = np.unique(batch.inputs["obs"][:, 0].astype(int))
    # The rows sent now have priority (|td| + epsilon) ** alpha with td = step / 2; the others keep 1.
    np.testing.assert_allclose(buffer.priorities(sent), np.sqrt(sent * 0.5 + 0.01))
    untouched = np.setdiff1d(np.arange(8), sent)
    np.testing.assert_allclose(buffer.priorities(untouched), 1.0)
    # A new transition enters with the largest priority seen: step 7 -> td 3.5.
    store(helper, 8)
    largest = max(1.0, sent.max() * 0.5 + 0.01)
    np.testing.assert_allclose(buffer.priorities(np.array([8])), np.sqrt(largest))


def test_priorities_steer_the_helpers_later_batches() -> None:
    # td = 0 for every row but step 3: after one update, step 3 dominates the samples.
    helper = parl.ExpReplayHelper(
        capacity=50, batch_size=64, warmup_steps=6, prioritized=True, alpha=1.0, beta_steps=0, seed=1
    )
    comm = TDCommunicator(lambda batch: np.where(batch.inputs["obs"][:, 0] == 3, 5.0, 0.0))
    helper.bind(comm)
    for step in range(6):
        store(helper, step)
    helper.learn()
    assert 3 in comm.batches[0].inputs["obs"][:, 0]
    store(helper, 6)
    helper.learn()
    later = comm.batches[1].inputs["obs"][:, 0]
    # Priorities now: step 3 -> 5, step 6 (new) -> 5, the rest 1e-6 (all were in the first batch of 64).
    assert set(later) <= {3.0, 6.0}
    weights = comm.batches[1].weights[:, 0]
    np.testing.assert_allclose(weights, 1e-6 / (5 + 1e-6), rtol=1e-4)  # beta 1: p_min / p


def test_the_helper_combines_prioritized_and_n_step() -> None:
    helper = parl.ExpReplayHelper(
        capacity=50, batch_size=32, warmup_steps=1, prioritized=True, n_step=2, gamma=0.5, seed=2
    )
    comm = TDCommunicator()
    helper.bind(comm)
    for step in range(4):
        store(helper, step, done=step == 3)
    helper.learn()
    batch = comm.batches[0]
    first = batch.inputs["obs"][:, 0].astype(int)
    np.testing.assert_array_equal(batch.bootstrap_steps[:, 0], np.where(first == 3, 1, 2))
    np.testing.assert_array_equal(batch.rewards["reward"][:, 0], np.where(first == 3, 1.0, 1.5))
    assert batch.weights.shape == (32, 1)


def test_a_missing_td_error_raises_naming_it() -> None:
    helper = parl.ExpReplayHelper(batch_size=4, warmup_steps=1, prioritized=True)
    helper.bind(TDCommunicator(lambda batch: None))
    store(helper, 0)
    with pytest.raises(ValueError, match="td_error.*got costs \\['loss'\\]"):
        helper.learn()


def test_a_td_error_of_the_wrong_length_raises() -> None:
    helper = parl.ExpReplayHelper(batch_size=4, warmup_steps=1, prioritized=True)
    helper.bind(TDCommunicator(lambda batch: np.zeros(3)))
    store(helper, 0)
    with pytest.raises(ValueError, match="td_error has 3 values.*4 rows"):
        helper.learn()


def test_priorities_come_from_dqn_through_a_real_wrapper(make_wrapper) -> None:
    """Two agents' batches waiting together: each is an update of its own (replay samples are never
    joined), and each helper gets and uses the td_error of its own rows."""
    algorithm = DQN(lambda: MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=(8,)), gamma=0.9)
    wrapper = make_wrapper(algorithm, min_batchsize=2, max_training_batchsize=2, training_timeout=5.0)
    helpers, sent, results = [], [[], []], [None, None]
    for i in range(2):
        helper = parl.ExpReplayHelper(capacity=20, batch_size=8, warmup_steps=4, prioritized=True, alpha=1.0, seed=i)
        comm = wrapper.communicator(i)
        send = comm.learn
        comm.learn = lambda batch, i=i, send=send: sent[i].append(batch) or send(batch)  # record what is sent
        helper.bind(comm)
        for step in range(4):
            obs = np.array([10 * i + step, 1.0], np.float32)
            helper.store_data({"obs": obs}, {"action": np.array([step % 2])}, 1.0, {"obs": obs}, False, False)
        helpers.append(helper)

    def learn(i: int) -> None:
        results[i] = helpers[i].learn()

    threads = [threading.Thread(target=learn, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert wrapper.stats.training_batches == 2 and wrapper.stats.training_requests == 2  # taken together
    for i, (helper, costs) in enumerate(zip(helpers, results)):
        td = costs["td_error"]
        assert td.shape == (8,)
        slots = sent[i][0].inputs["obs"][:, 0].astype(int) - 10 * i
        # Each sampled slot now has priority |td| + epsilon of its own row (alpha 1).
        np.testing.assert_allclose(helper.buffer.priorities(slots), np.abs(td) + 1e-6, rtol=1e-6)
        assert np.abs(td).max() > 0


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(prioritized=1), ["prioritized", "1"]),
        (dict(alpha=1.5), ["alpha", "1.5"]),
        (dict(beta_start=-0.5), ["beta_start", "-0.5"]),
        (dict(beta_steps=-1), ["beta_steps", "-1"]),
        (dict(priority_epsilon=0), ["priority_epsilon", "0"]),
        (dict(n_step=0), ["n_step", "0"]),
        (dict(n_step=1.5), ["n_step", "1.5"]),
        (dict(gamma=1.01), ["gamma", "1.01"]),
    ],
)
def test_bad_helper_options_raise_naming_the_option(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        parl.ExpReplayHelper(**kwargs)
    for word in words:
        assert word in str(info.value), str(info.value)
