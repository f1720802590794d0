"""ComputationWrapper.predict_batch: the one way every placement reaches a task's predict, with the
statistics and the row check written once."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import parl

from toys import EchoAlgorithm, EchoModel, echo_obs


class ShortAnswer(EchoAlgorithm):
    """Answers one row less than it was asked for."""

    def predict(self, inputs, states, *, deterministic=False):
        actions, next_states = super().predict(inputs, states, deterministic=deterministic)
        return {"action": actions["action"][:-1]}, next_states


def wrapper_of(algorithm: parl.Algorithm) -> parl.ComputationWrapper:
    return parl.ComputationWrapper(parl.ComputationTask("T", algorithm))


def test_a_batch_is_counted_and_answered_by_the_task() -> None:
    wrapper = wrapper_of(EchoAlgorithm(EchoModel))
    obs = np.stack([echo_obs(c, 1) for c in (4, 5, 6)])
    actions, next_states = wrapper.predict_batch(3, {"obs": obs}, {})
    assert actions["action"].reshape(-1).tolist() == [4001, 5001, 6001] and next_states == {}
    wrapper.predict_batch(1, {"obs": obs[:1]}, {})
    snapshot = wrapper.stats.snapshot()
    assert (snapshot.prediction_batches, snapshot.predictions, snapshot.max_prediction_batch) == (2, 4, 3)


def test_an_answer_with_another_number_of_rows_is_refused() -> None:
    wrapper = wrapper_of(ShortAnswer(EchoModel))
    obs = np.stack([echo_obs(c, 0) for c in (1, 2)])
    with pytest.raises(ValueError, match="the task answered 1 rows of 'action' for a batch of 2"):
        wrapper.predict_batch(2, {"obs": obs}, {})


def test_each_sender_gets_its_own_error_instance() -> None:
    wrapper = wrapper_of(EchoAlgorithm(EchoModel))
    original = ValueError("boom")
    first, second = wrapper.prediction_error(original), wrapper.prediction_error(original)
    assert first is not second and first.original is second.original is original
    assert "prediction in task 'T'" in str(first)


def test_paddle_is_not_left_without_grad_after_a_failure() -> None:
    wrapper = wrapper_of(ShortAnswer(EchoModel))
    with pytest.raises(ValueError):
        wrapper.predict_batch(2, {"obs": np.stack([echo_obs(1, 0), echo_obs(2, 0)])}, {})
    assert paddle.is_grad_enabled()
