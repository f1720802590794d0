"""A batch's row structure (Transition's sequence_lengths, bootstrap_steps, weights): defaults,
validation, discounts; joining it across agents; per-row costs split back."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import paddle
import pytest

import parl
from parl.core.batch import DICT_FIELDS, Transition
from parl.serving.computation_wrapper import _join_batches, _split_costs

from toys import WAIT, EchoAlgorithm, EchoModel, RecordingCommunicator, echo_batch, echo_obs

ROW_FIELDS = ("sequence_lengths", "bootstrap_steps", "weights", "behaviour_version")


def sample(rows: int, **row_fields) -> Transition:
    """A numpy batch of ``rows`` rows whose row structure is ``row_fields`` (none: a replay sample)."""
    return echo_batch(1, rows=rows)._replace(**{"sequence_lengths": None, **row_fields})


def tensors(rows: int, **row_fields) -> Transition:
    """What learn receives for :func:`sample`."""
    return sample(rows, **row_fields).to_tensors()


# -- Transition.to_tensors: the row structure learn receives ---------------------------------


def test_a_batch_without_row_fields_gets_the_defaults() -> None:
    batch = tensors(4)
    assert batch.sequence_lengths == (1, 1, 1, 1)
    assert batch.batch_size == 4
    assert batch.bootstrap_steps is None and batch.weights is None
    assert batch.uniform_weights is True
    discount = batch.discount(0.9)
    assert discount.dtype == paddle.float32 and discount.shape == [4, 1]
    np.testing.assert_array_equal(discount.numpy(), np.full((4, 1), 0.9, np.float32))
    per_row = paddle.to_tensor([[1.0], [2.0], [3.0], [6.0]])
    assert float(batch.weighted_mean(per_row)) == 3.0


def test_explicit_default_row_fields_give_what_absent_ones_give() -> None:
    explicit = tensors(
        3,
        sequence_lengths=(1, 1, 1),
        bootstrap_steps=np.ones((3, 1), np.float32),
        weights=np.ones((3, 1), np.float32),
    )
    implicit = tensors(3)
    assert explicit.sequence_lengths == implicit.sequence_lengths == (1, 1, 1)
    np.testing.assert_array_equal(explicit.discount(0.97).numpy(), implicit.discount(0.97).numpy())
    per_row = paddle.to_tensor([[1.0], [2.0], [4.0]])
    assert float(explicit.weighted_mean(per_row)) == float(implicit.weighted_mean(per_row))
    assert explicit.uniform_weights and implicit.uniform_weights


def test_given_fields_are_kept_and_flat_arrays_become_columns() -> None:
    fields = {
        "sequence_lengths": (2, 1, 3),
        "bootstrap_steps": np.array([1, 2, 3, 1, 1, 2], np.float32),  # [B], reshaped to [B, 1]
        "weights": np.array([[0.5], [1.0], [2.0], [1.0], [1.0], [0.25]], np.float32),
    }
    batch = tensors(6, **fields)
    assert batch.sequence_lengths == (2, 1, 3)
    assert all(isinstance(n, int) for n in batch.sequence_lengths)
    np.testing.assert_array_equal(batch.bootstrap_steps.numpy(), fields["bootstrap_steps"].reshape(-1, 1))
    np.testing.assert_array_equal(batch.weights.numpy(), fields["weights"])
    assert batch.bootstrap_steps.dtype == paddle.float32 and batch.weights.dtype == paddle.float32
    assert batch.uniform_weights is False


@pytest.mark.parametrize("lengths", [[2, 2], [3, 3], [5, 0], [6, -1], [0]], ids=["short", "long", "zero", "neg", "0"])
def test_sequence_lengths_that_do_not_sum_to_the_batch_or_are_not_positive_raise(lengths) -> None:
    with pytest.raises(ValueError) as info:
        tensors(5, sequence_lengths=tuple(lengths))
    message = str(info.value)
    assert "sequence_lengths" in message and str(lengths) in message and "5" in message


@pytest.mark.parametrize("field", ["bootstrap_steps", "weights"])
@pytest.mark.parametrize("rows", [3, 5])
def test_a_per_row_field_with_the_wrong_number_of_rows_raises(field, rows) -> None:
    with pytest.raises(ValueError) as info:
        tensors(4, **{field: np.ones((rows, 1), np.float32)})
    assert field in str(info.value) and str(rows) in str(info.value) and "4" in str(info.value)


def test_discount_is_gamma_to_the_power_of_the_steps() -> None:
    steps = np.array([[1], [2], [3], [5]], np.float32)
    batch = tensors(4, bootstrap_steps=steps)
    for gamma in (0.9, 0.5, 1.0, 0.0):
        np.testing.assert_allclose(batch.discount(gamma).numpy(), gamma**steps, rtol=1e-6)
    assert batch.discount(0.9).shape == [4, 1]


def test_discount_without_bootstrap_steps_is_gamma() -> None:
    np.testing.assert_allclose(tensors(3).discount(0.97).numpy(), np.full((3, 1), 0.97, np.float32))


@pytest.mark.parametrize(
    "weights, uniform",
    [(None, True), (np.ones((3, 1)), True), (np.array([1.0, 1.0, 0.5]), False), (np.array([2.0, 2.0, 2.0]), False)],
    ids=["absent", "all-ones", "one-differs", "all-twos"],
)
def test_uniform_weights_is_true_only_when_every_weight_is_one(weights, uniform) -> None:
    assert tensors(3, weights=weights).uniform_weights is uniform


def test_weighted_mean_weighs_each_row() -> None:
    batch = tensors(3, weights=np.array([1.0, 2.0, 0.5]))
    per_row = paddle.to_tensor([[2.0], [3.0], [4.0]])
    np.testing.assert_allclose(float(batch.weighted_mean(per_row)), (2.0 + 6.0 + 2.0) / 3, rtol=1e-6)


def test_to_tensors_builds_tensors_of_every_field_and_validates() -> None:
    batch = tensors(3, sequence_lengths=(1, 2), bootstrap_steps=np.array([1, 1, 2]), weights=np.array([1, 2, 3]))
    assert isinstance(batch, Transition)
    assert batch.sequence_lengths == (1, 2)
    assert isinstance(batch.bootstrap_steps, paddle.Tensor) and isinstance(batch.weights, paddle.Tensor)
    np.testing.assert_array_equal(batch.weights.numpy(), [[1.0], [2.0], [3.0]])
    assert batch.weights.dtype == paddle.float32
    for field in ("inputs", "actions", "rewards", "next_inputs"):
        assert all(isinstance(v, paddle.Tensor) for v in getattr(batch, field).values()), field
    assert isinstance(batch.next_episode_end, paddle.Tensor) and batch.states == {} and batch.next_states == {}
    np.testing.assert_array_equal(batch.inputs["obs"].numpy(), echo_batch(1, rows=3).inputs["obs"])
    with pytest.raises(ValueError, match="sequence_lengths"):
        tensors(3, sequence_lengths=(1, 1))


def test_a_task_refuses_a_batch_that_is_not_a_transition() -> None:
    task = parl.ComputationTask("T", EchoAlgorithm())
    with pytest.raises(ValueError, match="Transition, got dict"):
        task.learn(echo_batch(1)._asdict())


def test_a_wrapper_fails_only_the_sender_of_a_batch_that_is_not_a_transition(make_wrapper) -> None:
    wrapper = make_wrapper(EchoAlgorithm())
    with pytest.raises(parl.RemoteError, match="agent 3's training batch.*Transition, got dict"):
        wrapper.communicator(3).learn(echo_batch(3)._asdict())
    assert wrapper.communicator(4).learn(echo_batch(4))["rows"] == 2.0  # the training loop goes on


def test_a_training_request_is_checked_once_where_it_enters(make_wrapper, monkeypatch) -> None:
    import parl.serving.computation_task as task_module
    import parl.serving.computation_wrapper as wrapper_module

    checked = []

    def counting(module):
        original = module.check_transition

        def check(value, what):
            checked.append(what)
            return original(value, what)

        monkeypatch.setattr(module, "check_transition", check)

    counting(task_module)
    counting(wrapper_module)
    wrapper = make_wrapper(EchoAlgorithm())
    assert wrapper.communicator(3).learn(echo_batch(3))["rows"] == 2.0
    assert checked == ["agent 3's training batch"]
    wrapper.task.learn(echo_batch(4))  # called directly, the task checks at its own door
    assert checked == ["agent 3's training batch", "task 'T': learn"]


def test_every_field_is_a_dict_of_arrays_the_episode_end_or_row_structure() -> None:
    assert set(Transition._fields) == set(DICT_FIELDS) | {"next_episode_end"} | set(ROW_FIELDS)


def test_a_batch_pickles_whole_as_the_processes_placement_sends_it() -> None:
    batch = echo_batch(2, rows=3)._replace(weights=np.array([[0.5], [1.0], [2.0]], np.float32))
    again = pickle.loads(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(again) is Transition and again.sequence_lengths == (3,) and again.bootstrap_steps is None
    for field in DICT_FIELDS:
        original = getattr(batch, field)
        assert sorted(getattr(again, field)) == sorted(original)
        for name, value in original.items():
            np.testing.assert_array_equal(getattr(again, field)[name], value)
    np.testing.assert_array_equal(again.weights, batch.weights)
    np.testing.assert_array_equal(again.next_episode_end, batch.next_episode_end)


# -- joining batches of several agents ---------------------------------------------------


def test_joining_batches_where_only_some_carry_row_fields_fills_in_the_defaults() -> None:
    a = echo_batch(1, rows=3)._replace(sequence_lengths=(3,), weights=np.array([[0.5], [0.25], [2.0]], np.float32))
    b = echo_batch(2, rows=2)._replace(sequence_lengths=None)  # no row fields: two one-row segments, weight 1
    c = echo_batch(3, rows=2)._replace(sequence_lengths=(1, 1), bootstrap_steps=np.array([[3.0], [2.0]], np.float32))
    joined = _join_batches([a, b, c])

    assert joined.sequence_lengths == (3, 1, 1, 1, 1)
    np.testing.assert_array_equal(joined.weights, [[0.5], [0.25], [2.0], [1.0], [1.0], [1.0], [1.0]])
    np.testing.assert_array_equal(joined.bootstrap_steps, [[1.0], [1.0], [1.0], [1.0], [1.0], [3.0], [2.0]])
    np.testing.assert_array_equal(joined.inputs["obs"][:, 0] // 1000, [1, 1, 1, 2, 2, 3, 3])
    assert joined.next_episode_end.shape == (7, 1)

    batch = joined.to_tensors()
    assert batch.sequence_lengths == (3, 1, 1, 1, 1)
    assert batch.uniform_weights is False


def test_joining_segments_concatenates_the_sequence_lengths_in_sender_order() -> None:
    batches = [echo_batch(code, rows=rows) for code, rows in ((1, 4), (2, 1), (3, 2))]
    joined = _join_batches(batches)
    assert joined.sequence_lengths == (4, 1, 2)
    assert all(type(n) is int for n in joined.sequence_lengths)
    # Each segment's rows are contiguous and in time order.
    np.testing.assert_array_equal(joined.inputs["obs"][:, 0], [1000, 1001, 1002, 1003, 2000, 3000, 3001])


def test_joining_batches_without_row_fields_adds_none() -> None:
    bare = [echo_batch(code)._replace(sequence_lengths=None) for code in (1, 2)]
    joined = _join_batches(bare)
    assert all(getattr(joined, field) is None for field in ROW_FIELDS)


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

    def learn(self, batch):
        costs = super().learn(batch)
        self.batches = getattr(self, "batches", []) + [batch]
        return {**costs, "td_error": batch.inputs["obs"][:, :1] * 1.0}


def test_td_error_from_a_real_task_is_split_back_to_each_sender(make_wrapper) -> None:
    algorithm = TdErrorAlgorithm()
    wrapper = make_wrapper(algorithm, min_batchsize=3, training_timeout=WAIT)
    sizes = {1: 3, 2: 1, 3: 2}
    replies = {}
    errors = []

    def send(code: int) -> None:
        try:
            replies[code] = wrapper.communicator(code).learn(echo_batch(code, rows=sizes[code]))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(code,)) for code in sizes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    assert not errors, errors
    assert len(algorithm.learn_batches) == 1, "the three batches should be joined into one update"
    assert sorted(algorithm.batches[0].sequence_lengths) == [1, 2, 3]
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
    comm = RecordingCommunicator(EchoModel())
    helper.bind(comm)
    sent_lengths = []
    for step in range(episode_length):
        last = step == episode_length - 1
        helper.store_data(
            {"obs": echo_obs(1, step)}, {"action": np.array([step])}, 1.0, {"obs": echo_obs(1, step + 1)}, last, False
        )
        if helper.learn() is not None:
            batch = comm.batches[-1]
            rows = batch.batch_size
            sent_lengths.append(rows)
            assert batch.sequence_lengths == (rows,) and type(batch.sequence_lengths[0]) is int
            assert batch.to_tensors().sequence_lengths == (rows,)
    full, rest = divmod(episode_length, sample_interval)
    assert sent_lengths == [sample_interval] * full + ([rest] if rest else [])
    # The segment is in time order: each row's next input is the following row's input.
    steps = np.concatenate([b.inputs["obs"][:, 0] for b in comm.batches])
    np.testing.assert_array_equal(steps, 1000 + np.arange(episode_length))
