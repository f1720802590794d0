"""Tensors in and out of paddle for the serving path: the one place parl reaches into paddle's internals.

    t = tensor(array)                         # a new tensor holding a copy of ``array``
    held = ReusedTensors()
    inputs = held.fill({"obs": array})        # the same tensors on every call, refilled
    enabled = has_grad(); set_has_grad(False) # gradients off for this thread (what paddle.no_grad sets)

What each private name saves, per call, on CPU (paddle 3.x):

- :func:`tensor`: paddle wraps the eager ``Tensor`` C constructor in a Python
  ``__init__`` (for its newer call forms) that costs as much as the
  constructor itself, about half of ``paddle.to_tensor`` each; this calls the
  constructor it wraps (``original_init``) directly.
- :meth:`ReusedTensors.fill`: copying into a held tensor
  (``DenseTensor.set``) costs about 1 us where a new tensor costs about 17 us.
- :func:`has_grad` / :func:`set_has_grad`: the per-thread flag
  ``paddle.no_grad()`` sets, without its Python context manager.

When a private name is missing, or fails a check of what it makes, at import
(a paddle upgrade that moved it), each falls back to the public API
(``paddle.to_tensor``, a new tensor per fill, ``paddle.is_grad_enabled`` and
``paddle.set_grad_enabled``): slower, with the same results.
:data:`PRIVATE_API` says which set is in use.
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import paddle


def _public_tensor(array: np.ndarray) -> paddle.Tensor:
    return paddle.to_tensor(np.ascontiguousarray(array))


def _public_has_grad() -> bool:
    return paddle.is_grad_enabled()


def _public_set_has_grad(enabled: bool) -> None:
    paddle.set_grad_enabled(enabled)  # sets the flag at once; the context manager form only restores it


def _private_api() -> Tuple[
    Callable[[np.ndarray], paddle.Tensor], Callable[[], bool], Callable[[bool], None], Callable[[], object]
]:
    """The private constructor, the gradient flag's getter and setter, and the current place.

    Raises:
        Exception: any of them is missing or makes something other than the public API does.
    """
    from paddle.base import core

    tensor_class = core.eager.Tensor
    # The C constructor paddle's Tensor.__init__ wraps (the wrapper passes a numpy array through to it).
    init = tensor_class.__init__.__globals__["original_init"]
    getter, setter = core._has_grad, core._set_has_grad  # type: ignore[attr-defined]  # in paddle, not its stubs
    place_of = paddle.framework._current_expected_place

    def private_tensor(array: np.ndarray) -> paddle.Tensor:
        out = tensor_class.__new__(tensor_class)
        init(out, np.ascontiguousarray(array))
        return out

    sample = np.arange(6, dtype=np.float32).reshape(2, 3)
    made, reference = private_tensor(sample), _public_tensor(sample)
    made.get_tensor().set(np.ascontiguousarray(sample[::-1]), place_of())
    if made.shape != reference.shape or made.dtype != reference.dtype or not made.stop_gradient:
        raise TypeError("the eager Tensor constructor makes tensors unlike paddle.to_tensor's")
    if not np.array_equal(made.numpy(), sample[::-1]):
        raise TypeError("DenseTensor.set did not refill the tensor")
    if not isinstance(getter(), bool):
        raise TypeError("core._has_grad does not return a bool")
    return private_tensor, getter, setter, place_of


_place_of: Optional[Callable[[], object]]  # the current place, for the private refill (None: not used)
try:
    _tensor, _has_grad, _set_has_grad, _place_of = _private_api()
    #: Whether the private names are in use (False: the public fallbacks).
    PRIVATE_API = True
except Exception:  # noqa: BLE001 - any failure means: use the public API
    _tensor, _has_grad, _set_has_grad, _place_of = _public_tensor, _public_has_grad, _public_set_has_grad, None
    PRIVATE_API = False


def tensor(array: np.ndarray) -> paddle.Tensor:
    """A new tensor holding a copy of ``array`` (made contiguous), as ``paddle.to_tensor`` makes it."""
    return _tensor(array)


#: Whether gradients are recorded in this thread (``paddle.is_grad_enabled``).
has_grad: Callable[[], bool] = _has_grad

#: Turn gradient recording on or off for this thread (what ``paddle.no_grad`` sets and restores).
set_has_grad: Callable[[bool], None] = _set_has_grad


class ReusedTensors:
    """Tensors by name, refilled with each call's arrays instead of made anew.

    A refilled tensor takes the array's shape and dtype, as :func:`tensor`
    would make it. The tensors are shared between calls: read them out (copy)
    before the next :meth:`fill`, and fill from one thread at a time.
    """

    def __init__(self) -> None:
        self._held: Dict[str, Tuple[paddle.Tensor, object]] = {}

    def fill(self, arrays: Mapping[str, np.ndarray]) -> Dict[str, paddle.Tensor]:
        """``arrays`` as tensors, by name."""
        if _place_of is None:
            return {name: _tensor(array) for name, array in arrays.items()}
        out = {}
        held = self._held
        for name, array in arrays.items():
            entry = held.get(name)
            if entry is None:
                out[name] = t = _tensor(array)
                # DenseTensor.set wants the place typed (CPUPlace, CUDAPlace), as this gives it.
                held[name] = (t, _place_of())
            else:
                t, place = entry
                t.get_tensor().set(np.ascontiguousarray(array), place)
                out[name] = t
        return out
