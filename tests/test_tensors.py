"""parl.layers.tensors: the private paddle names it uses make what the public API makes, and it falls
back to the public API when they are missing."""

from __future__ import annotations

import threading

import numpy as np
import paddle
import pytest
from paddle.base import core

from parl.layers import tensors

ARRAYS = [np.ones((1, 4), np.float32), np.arange(6).reshape(3, 2), np.zeros((2, 3, 3), np.uint8)[:, ::2]]


def describe(t: paddle.Tensor):
    return t.dtype, t.shape, t.stop_gradient, t.persistable, str(t.place)


def test_this_paddle_takes_the_private_path() -> None:
    """A paddle upgrade that moves a private name shows here (the task is then slower, not wrong)."""
    assert tensors.PRIVATE_API


@pytest.mark.parametrize("array", ARRAYS)
def test_tensors_are_what_paddles_constructor_makes(array: np.ndarray) -> None:
    """tensor() skips paddle's Python wrapper around the Tensor constructor: the same tensors."""
    ours, theirs = tensors.tensor(array), core.eager.Tensor(np.ascontiguousarray(array))
    assert describe(ours) == describe(theirs)
    np.testing.assert_array_equal(ours.numpy(), array)


@pytest.mark.parametrize("array", ARRAYS)
def test_the_public_fallback_makes_the_same_tensors(array: np.ndarray) -> None:
    ours, public = tensors.tensor(array), tensors._public_tensor(array)
    assert describe(ours) == describe(public)
    np.testing.assert_array_equal(ours.numpy(), public.numpy())


def test_refilled_tensors_take_each_arrays_values_shape_and_dtype() -> None:
    held = tensors.ReusedTensors()
    first = held.fill({"obs": np.ones((2, 3), np.float32)})["obs"]
    second = held.fill({"obs": np.arange(8, dtype=np.float32).reshape(4, 2)})["obs"]
    assert second is first
    assert second.shape == [4, 2]
    np.testing.assert_array_equal(second.numpy(), np.arange(8, dtype=np.float32).reshape(4, 2))
    third = held.fill({"obs": np.arange(3)[::-1]})["obs"]  # not contiguous, another dtype
    assert third.dtype == paddle.int64
    np.testing.assert_array_equal(third.numpy(), [2, 1, 0])


def test_without_the_private_names_fill_makes_new_tensors(monkeypatch) -> None:
    monkeypatch.setattr(tensors, "_place_of", None)
    monkeypatch.setattr(tensors, "_tensor", tensors._public_tensor)
    held = tensors.ReusedTensors()
    first = held.fill({"obs": np.ones((2, 3), np.float32)})["obs"]
    second = held.fill({"obs": np.zeros((2, 3), np.float32)})["obs"]
    assert second is not first
    np.testing.assert_array_equal(first.numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(second.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize(
    "owner, missing", [(paddle.framework, "_current_expected_place"), (core, "_has_grad"), (core, "_set_has_grad")]
)
def test_a_missing_private_name_is_noticed(owner: object, missing: str, monkeypatch) -> None:
    monkeypatch.delattr(owner, missing)
    with pytest.raises(AttributeError):
        tensors._private_api()


@pytest.mark.parametrize(
    "getter, setter",
    [(tensors.has_grad, tensors.set_has_grad), (tensors._public_has_grad, tensors._public_set_has_grad)],
)
def test_the_gradient_switch_is_paddles_per_thread_flag(getter, setter) -> None:
    seen = []
    assert getter() and paddle.is_grad_enabled()
    setter(False)
    try:
        assert not paddle.is_grad_enabled() and not getter()
        thread = threading.Thread(target=lambda: seen.append(getter()))
        thread.start()
        thread.join(5)
    finally:
        setter(True)
    assert paddle.is_grad_enabled() and seen == [True]
