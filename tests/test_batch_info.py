"""BatchInfo: defaults, validation, discounts; joining info fields across agents; per-row costs split back."""

from __future__ import annotations

import threading

import numpy as np
import paddle
import pytest

import parl
from parl.core.batch import INFO_FIELDS, BatchInfo, batch_info, default_info_arrays, make_batch_info
from parl.serving.computation_wrapper import _join_batches, _split_costs

from toys import WAIT, EchoAlgorithm, RecordingCommunicator, ToyModel, echo_batch, echo_obs


def numpy_of(info: BatchInfo) -> dict:
    return {"bootstrap_steps": info.bootstrap_steps.numpy(), "weights": info.weights.numpy()}


# -- make_batch_info / batch_info -------------------------------------------------------


def test_a_batch_without_info_fields_gets_the_defaults() -> None:
    info = make_batch_info({}, 4, paddle.to_tensor)
    assert info.sequence_lengths == (1, 1, 1, 1)
    assert info.batch_size == 4
    np.testing.assert_array_equal(info.bootstrap_steps.numpy(), np.ones((4, 1), np.float32))
    np.testing.assert_array_equal(info.weights.numpy(), np.ones((4, 1), np.float32))
    assert info.uniform_weights is True
    assert info.bootstrap_steps.dtype == paddle.float32 and info.weights.dtype == paddle.float32


def test_default_info_arrays_match_the_defaults_of_make_batch_info() -> None:
    arrays = default_info_arrays(3)
    assert set(arrays) == set(INFO_FIELDS)
    explicit = make_batch_info(arrays, 3, paddle.to_tensor)
    implicit = make_batch_info({}, 3, paddle.to_tensor)
    assert explicit.sequence_lengths == implicit.sequence_lengths == (1, 1, 1)
    for key, value in numpy_of(explicit).items():
        np.testing.assert_array_equal(value, numpy_of(implicit)[key])
    assert explicit.uniform_weights and implicit.uniform_weights


def test_given_fields_are_kept_and_flat_arrays_become_columns() -> None:
    batch = {
        "sequence_lengths": np.array([2, 1, 3], np.int64),
        "bootstrap_steps": np.array([1, 2, 3, 1, 1, 2], np.float32),  # [B], reshaped to [B, 1]
        "weights": np.array([[0.5], [1.0], [2.0], [1.0], [1.0], [0.25]], np.float32),
    }
    info = make_batch_info(batch, 6, paddle.to_tensor)
    assert info.sequence_lengths == (2, 1, 3)
    assert all(isinstance(n, int) for n in info.sequence_lengths)
    np.testing.assert_array_equal(info.bootstrap_steps.numpy(), batch["bootstrap_steps"].reshape(-1, 1))
    np.testing.assert_array_equal(info.weights.numpy(), batch["weights"])
    assert info.uniform_weights is False


@pytest.mark.parametrize("lengths", [[2, 2], [3, 3], [5, 0], [6, -1], [0]], ids=["short", "long", "zero", "neg", "0"])
def test_sequence_lengths_that_do_not_sum_to_the_batch_or_are_not_positive_raise(lengths) -> None:
    with pytest.raises(ValueError) as info:
        make_batch_info({"sequence_lengths": np.array(lengths, np.int64)}, 5, paddle.to_tensor)
    message = str(info.value)
    assert "sequence_lengths" in message and str(lengths) in message and "5" in message


@pytest.mark.parametrize("field", ["bootstrap_steps", "weights"])
@pytest.mark.parametrize("rows", [3, 5])
def test_a_per_row_field_with_the_wrong_number_of_rows_raises(field, rows) -> None:
    with pytest.raises(ValueError) as info:
        make_batch_info({field: np.ones((rows, 1), np.float32)}, 4, paddle.to_tensor)
    assert field in str(info.value) and str(rows) in str(info.value) and "4" in str(info.value)


def test_discount_is_gamma_to_the_power_of_the_steps() -> None:
    steps = np.array([[1], [2], [3], [5]], np.float32)
    info = batch_info(4, bootstrap_steps=steps)
    for gamma in (0.9, 0.5, 1.0, 0.0):
        np.testing.assert_allclose(info.discount(gamma).numpy(), gamma**steps, rtol=1e-6)
    assert info.discount(0.9).shape == [4, 1]


def test_discount_without_bootstrap_steps_is_gamma() -> None:
    np.testing.assert_allclose(batch_info(3).discount(0.97).numpy(), np.full((3, 1), 0.97, np.float32))


@pytest.mark.parametrize(
    "weights, uniform",
    [(None, True), (np.ones((3, 1)), True), (np.array([1.0, 1.0, 0.5]), False), (np.array([2.0, 2.0, 2.0]), False)],
    ids=["absent", "all-ones", "one-differs", "all-twos"],
)
def test_uniform_weights_is_true_only_when_every_weight_is_one(weights, uniform) -> None:
    assert batch_info(3, weights=weights).uniform_weights is uniform


def test_batch_info_helper_builds_tensors_and_validates() -> None:
    info = batch_info(3, sequence_lengths=[1, 2], bootstrap_steps=np.array([1, 1, 2]), weights=np.array([1, 2, 3]))
    assert isinstance(info, BatchInfo)
    assert info.sequence_lengths == (1, 2)
    assert isinstance(info.bootstrap_steps, paddle.Tensor) and isinstance(info.weights, paddle.Tensor)
    np.testing.assert_array_equal(info.weights.numpy(), [[1.0], [2.0], [3.0]])
    assert info.weights.dtype == paddle.float32
    with pytest.raises(ValueError, match="sequence_lengths"):
        batch_info(3, sequence_lengths=[1, 1])


# -- joining batches of several agents ---------------------------------------------------


def test_joining_batches_where_only_some_carry_info_fields_fills_in_the_defaults() -> None:
    a = echo_batch(1, rows=3)
    a["sequence_lengths"] = np.array([3], np.int64)
    a["weights"] = np.array([[0.5], [0.25], [2.0]], np.float32)
    b = echo_batch(2, rows=2)
    del b["sequence_lengths"]  # no info fields: two rows of length-1 segments, weight 1
    c = echo_batch(3, rows=2)
    c["sequence_lengths"] = np.array([1, 1], np.int64)
    c["bootstrap_steps"] = np.array([[3.0], [2.0]], np.float32)
    joined = _join_batches([a, b, c])

    np.testing.assert_array_equal(joined["sequence_lengths"], [3, 1, 1, 1, 1])
    np.testing.assert_array_equal(joined["weights"], [[0.5], [0.25], [2.0], [1.0], [1.0], [1.0], [1.0]])
    np.testing.assert_array_equal(joined["bootstrap_steps"], [[1.0], [1.0], [1.0], [1.0], [1.0], [3.0], [2.0]])
    np.testing.assert_array_equal(joined["inputs"]["obs"][:, 0] // 1000, [1, 1, 1, 2, 2, 3, 3])
    assert joined["next_episode_end"].shape == (7, 1)

    info = make_batch_info(joined, 7, paddle.to_tensor)
    assert info.sequence_lengths == (3, 1, 1, 1, 1)
    assert info.uniform_weights is False


def test_joining_segments_concatenates_the_sequence_lengths_in_sender_order() -> None:
    batches = []
    for code, rows in ((1, 4), (2, 1), (3, 2)):
        batch = echo_batch(code, rows=rows)
        batch["sequence_lengths"] = np.array([rows], np.int64)
        batches.append(batch)
    joined = _join_batches(batches)
    np.testing.assert_array_equal(joined["sequence_lengths"], [4, 1, 2])
    assert joined["sequence_lengths"].dtype == np.int64
    # Each segment's rows are contiguous and in time order.
    np.testing.assert_array_equal(joined["inputs"]["obs"][:, 0], [1000, 1001, 1002, 1003, 2000, 3000, 3001])


def test_joining_batches_without_info_fields_adds_none() -> None:
    bare = [{k: v for k, v in echo_batch(code).items() if k not in INFO_FIELDS} for code in (1, 2)]
    joined = _join_batches(bare)
    assert not set(INFO_FIELDS) & set(joined)


def test_split_costs_gives_each_sender_its_own_rows_of_td_error_and_the_shared_scalars() -> None:
    costs = {"loss": 0.5, "td_error": np.arange(6, dtype=np.float32)}
    replies = _split_costs(costs, [3, 1, 2])
    assert [r["loss"] for r in replies] == [0.5, 0.5, 0.5]
    np.testing.assert_array_equal(replies[0]["td_error"], [0, 1, 2])
    np.testing.assert_array_equal(replies[1]["td_error"], [3])
    np.testing.assert_array_equal(replies[2]["td_error"], [4, 5])


def test_split_costs_without_per_row_values_shares_one_dict() -> None:
    replies = _split_costs({"loss": 1.0}, [2, 2])
    assert replies == [{"loss": 1.0}, {"loss": 1.0}]


class TdErrorAlgorithm(EchoAlgorithm):
    """Returns ``td_error = obs[:, 0]``, so each row's value names its sender and step."""

    def learn(self, inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info):
        costs = super().learn(inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info)
        self.infos = getattr(self, "infos", []) + [info]
        return {**costs, "td_error": inputs["obs"][:, :1] * 1.0}


def test_td_error_from_a_real_task_is_split_back_to_each_sender(make_wrapper) -> None:
    algorithm = TdErrorAlgorithm()
    wrapper = make_wrapper(algorithm, min_batchsize=3, training_timeout=WAIT)
    sizes = {1: 3, 2: 1, 3: 2}
    replies = {}
    errors = []

    def send(code: int) -> None:
        try:
            batch = echo_batch(code, rows=sizes[code])
            batch["sequence_lengths"] = np.array([sizes[code]], np.int64)
            replies[code] = wrapper.communicator(code).learn(batch)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(code,)) for code in sizes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    assert not errors, errors
    assert len(algorithm.learn_batches) == 1, "the three batches should be joined into one update"
    assert sorted(algorithm.infos[0].sequence_lengths) == [1, 2, 3]
    for code, rows in sizes.items():
        reply = replies[code]
        np.testing.assert_array_equal(reply["td_error"], [1000 * code + i for i in range(rows)])
        assert reply["rows"] == 6.0  # the shared scalar of the joined batch
        assert isinstance(reply["loss"], float)


def test_a_one_row_batch_gets_its_td_error_back_as_an_array() -> None:
    """A per-row td_error stays an array even for a one-row batch (prioritized replay indexes it)."""
    task = parl.ComputationTask("T", TdErrorAlgorithm())
    costs = task.learn(echo_batch(4, rows=1))
    assert isinstance(costs["td_error"], np.ndarray), f"got {type(costs['td_error']).__name__}"
    np.testing.assert_array_equal(costs["td_error"], [4000.0])


# -- OnPolicyHelper marks its batch as one segment -----------------------------------------


@pytest.mark.parametrize("sample_interval, episode_length", [(3, 10), (4, 2), (1, 3)])
def test_on_policy_helper_sends_its_cached_steps_as_one_segment(sample_interval, episode_length) -> None:
    helper = parl.OnPolicyHelper(sample_interval=sample_interval)
    comm = RecordingCommunicator(ToyModel())
    helper.bind(comm)
    sent_lengths = []
    for step in range(episode_length):
        last = step == episode_length - 1
        helper.store_data(
            {"obs": echo_obs(1, step)}, {"action": np.array([step])}, 1.0, {"obs": echo_obs(1, step + 1)}, last, False
        )
        if helper.learn() is not None:
            batch = comm.batches[-1]
            rows = len(batch["next_episode_end"])
            sent_lengths.append(rows)
            np.testing.assert_array_equal(batch["sequence_lengths"], [rows])
            assert batch["sequence_lengths"].dtype == np.int64
            assert make_batch_info(batch, rows, paddle.to_tensor).sequence_lengths == (rows,)
    full, rest = divmod(episode_length, sample_interval)
    assert sent_lengths == [sample_interval] * full + ([rest] if rest else [])
    # The segment is in time order: each row's next input is the following row's input.
    steps = np.concatenate([b["inputs"]["obs"][:, 0] for b in comm.batches])
    np.testing.assert_array_equal(steps, 1000 + np.arange(episode_length))
