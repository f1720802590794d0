"""``Algorithm.learn``'s eight-argument form of parl before 0.2.0, mapped onto ``learn(batch)``.

    # written for parl before 0.2.0: still learns, with a DeprecationWarning when the class is made
    class MyAlgorithm(parl.Algorithm):
        def learn(self, inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info):
            ...                                     # info: a BatchInfo

    # called the old way: the arguments become one parl.Transition
    costs = algorithm.learn(inputs, next_inputs, states, next_states, next_episode_end, actions, rewards,
                            batch_info(batch_size))

:meth:`parl.Algorithm.__init_subclass__` hands every subclass that defines ``learn`` to
:func:`accept_both_forms`: a ``learn`` of the old signature gets the Transition's fields and a
:class:`BatchInfo` made from its row structure; a ``learn(self, batch)`` also takes the eight old
arguments. :class:`BatchInfo` and :func:`batch_info` are the old row-structure type and its
constructor (``parl.framework.batch_info``), built on :meth:`parl.Transition.to_tensors`.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import paddle

from parl.core.batch import Transition
from parl.moved_names import DEPRECATED_IN, deprecated

#: The arguments of ``learn`` before 0.2.0, after ``self``.
OLD_ARGUMENTS = ("inputs", "next_inputs", "states", "next_states", "next_episode_end", "actions", "rewards", "info")
OLD_CALL = f"Algorithm.learn({', '.join(OLD_ARGUMENTS)})"
NEW_CALL = "Algorithm.learn(batch: parl.Transition)"
#: Optional batch fields that describe rows (the old module's name for them).
INFO_FIELDS = ("sequence_lengths", "bootstrap_steps", "weights")

TensorDict = Dict[str, paddle.Tensor]


@dataclass(frozen=True)
class BatchInfo:
    """Row structure of one training batch, as the old ``learn`` received it.

    Attributes:
        sequence_lengths: lengths of the consecutive time-ordered segments; they sum to the batch size.
        bootstrap_steps: ``[B, 1]`` env steps each transition spans; discount the bootstrap by
            ``gamma ** bootstrap_steps``.
        weights: ``[B, 1]`` importance weights to multiply per-row losses by.
        uniform_weights: True when every weight is 1 (algorithms may skip the multiply).
    """

    sequence_lengths: Tuple[int, ...]
    bootstrap_steps: paddle.Tensor
    weights: paddle.Tensor
    uniform_weights: bool = True

    @property
    def batch_size(self) -> int:
        """Number of rows."""
        return int(self.bootstrap_steps.shape[0])

    def discount(self, gamma: float) -> paddle.Tensor:
        """``gamma ** bootstrap_steps``: the factor on each row's bootstrapped value."""
        return paddle.pow(paddle.full_like(self.bootstrap_steps, gamma), self.bootstrap_steps)


def info_of(batch: Transition[paddle.Tensor]) -> BatchInfo:
    """The BatchInfo of a batch as ``learn`` receives it (``to_tensors``'s): absent steps and weights are ones."""
    rows = batch.batch_size
    ones = paddle.ones([rows, 1], dtype="float32")
    return BatchInfo(
        sequence_lengths=tuple(batch.sequence_lengths or (1,) * rows),
        bootstrap_steps=ones if batch.bootstrap_steps is None else batch.bootstrap_steps,
        weights=ones if batch.weights is None else batch.weights,
        uniform_weights=batch.weights is None,
    )


def make_batch_info(
    batch: Mapping[str, Any], batch_size: int, to_tensor: Callable[[np.ndarray], paddle.Tensor]
) -> BatchInfo:
    """The BatchInfo of the info fields of a numpy ``batch`` (fields it lacks take their defaults).

    Raises:
        ValueError: the sequence lengths do not sum to the batch size, or a field has the wrong shape.
    """
    rows = Transition(
        inputs={},
        actions={},
        rewards={},
        next_inputs={},
        next_episode_end=np.zeros((batch_size, 1), np.float32),
        states={},
        next_states={},
        **{field: batch.get(field) for field in INFO_FIELDS},
    )
    return info_of(rows.to_tensors(to_tensor))


def batch_info(
    batch_size: int,
    *,
    sequence_lengths: Optional[Sequence[int]] = None,
    bootstrap_steps: Optional[np.ndarray] = None,
    weights: Optional[np.ndarray] = None,
) -> BatchInfo:
    """A BatchInfo built from numpy values, for calling the old ``learn`` directly."""
    fields = {"sequence_lengths": sequence_lengths, "bootstrap_steps": bootstrap_steps, "weights": weights}
    return make_batch_info(fields, batch_size, paddle.to_tensor)


def default_info_arrays(batch_size: int) -> Dict[str, np.ndarray]:
    """The info fields of a batch that sets none of them."""
    return {
        "sequence_lengths": np.ones(batch_size, dtype=np.int64),
        "bootstrap_steps": np.ones((batch_size, 1), dtype=np.float32),
        "weights": np.ones((batch_size, 1), dtype=np.float32),
    }


def transition_of(
    inputs: TensorDict,
    next_inputs: TensorDict,
    states: TensorDict,
    next_states: TensorDict,
    next_episode_end: paddle.Tensor,
    actions: TensorDict,
    rewards: TensorDict,
    info: BatchInfo,
) -> Transition[paddle.Tensor]:
    """The batch ``learn(batch)`` takes for the eight old arguments."""
    return Transition(
        inputs=inputs,
        actions=actions,
        rewards=rewards,
        next_inputs=next_inputs,
        next_episode_end=next_episode_end,
        states=states,
        next_states=next_states,
        sequence_lengths=tuple(info.sequence_lengths),
        bootstrap_steps=info.bootstrap_steps,
        weights=None if info.uniform_weights else info.weights,
    )


def accept_both_forms(cls: type) -> None:
    """Make the ``learn`` that ``cls`` defines take a Transition and the eight old arguments alike.

    Only a ``learn(self, batch)`` and a ``learn`` of the old signature (``self`` and eight
    parameters) are changed; the old one is deprecated, with a warning at the class statement. A
    ``learn`` with other parameters (options of its own) is left as it is.
    """
    learn = cls.__dict__.get("learn")
    if not inspect.isfunction(learn) or getattr(learn, "_takes_both_forms", False):
        return
    parameters = list(inspect.signature(learn).parameters.values())
    plain = all(p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in parameters)
    if not plain or len(parameters) not in (2, 1 + len(OLD_ARGUMENTS)):
        return  # a learn of its own signature (extra options): left as it is
    old = len(parameters) == 1 + len(OLD_ARGUMENTS)
    if old:
        # Frames: deprecated, here, Algorithm.__init_subclass__, ABCMeta.__new__, the class statement.
        old_learn = f"{cls.__module__}.{cls.__qualname__}.learn({', '.join(OLD_ARGUMENTS)})"
        deprecated(old_learn, NEW_CALL, DEPRECATED_IN, stacklevel=5)
    setattr(cls, "learn", _both_forms(learn, old))  # noqa: B010 - cls is any class: learn is set by name


_ABSENT = object()  # an old argument not given: learn was called with one batch


def _both_forms(learn: Callable[..., object], old: bool) -> Callable[..., object]:
    """``learn`` (old: of the eight-argument signature) as a method that takes either form."""

    @functools.wraps(learn)
    def learn_either(
        self: object,
        batch: Any,  # a Transition, or the first of the eight old arguments
        next_inputs: Any = _ABSENT,
        states: Any = _ABSENT,
        next_states: Any = _ABSENT,
        next_episode_end: Any = _ABSENT,
        actions: Any = _ABSENT,
        rewards: Any = _ABSENT,
        info: Any = _ABSENT,
    ) -> object:
        if next_inputs is _ABSENT:  # today's call
            if not old:
                return learn(self, batch)
            fields = (batch.inputs, batch.next_inputs, batch.states, batch.next_states, batch.next_episode_end)
            return learn(self, *fields, batch.actions, batch.rewards, info_of(batch))
        arguments = (batch, next_inputs, states, next_states, next_episode_end, actions, rewards, info)
        if any(argument is _ABSENT for argument in arguments):
            given = sum(argument is not _ABSENT for argument in arguments)
            raise TypeError(f"learn takes one batch or the eight arguments {OLD_ARGUMENTS}, got {given} arguments")
        # Frames: deprecated, here, the caller.
        deprecated(OLD_CALL, NEW_CALL, DEPRECATED_IN, stacklevel=3)
        return learn(self, *arguments) if old else learn(self, transition_of(*arguments))

    learn_either._takes_both_forms = True  # type: ignore[attr-defined]
    return learn_either
