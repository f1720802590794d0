"""Transition: one agent step, or a batch of them, as one named type from ``store_data`` to ``Algorithm.learn``.

    step = Transition(
        inputs={"obs": obs}, actions={"action": action}, rewards={"reward": reward},
        next_inputs={"obs": next_obs}, next_episode_end=np.array([0.0], np.float32),
        states={}, next_states={},
    )
    batch = helper's stacked or sampled steps       # the same fields, a batch axis in front
    tensors = batch.to_tensors()                    # what Algorithm.learn receives

Every dict is keyed by spec name. One transition holds one sample per spec
(no batch axis); a batch holds ``B`` rows of each. The array kind is the
type's parameter: numpy on the agent side (helpers, replay buffers,
transports), paddle tensors in ``Algorithm.learn``;
:meth:`ComputationTask.learn <parl.serving.computation_task.ComputationTask.learn>`
normalizes the inputs, transforms the rewards and converts one into the other.

Fields:

- ``inputs``, ``actions``, ``rewards``, ``next_inputs``: dicts of arrays.
- ``next_episode_end`` (float32 ``[1]``; batched ``[B, 1]``): 1.0 where
  ``next_inputs`` is terminal (the task ended: nothing to bootstrap), 0.0
  otherwise, a time-limit truncation included.
- ``states``, ``next_states``: recurrent states before and after the step
  (empty dicts for feedforward models).

and the row structure, three optional fields that are None where every row
takes the default:

- ``sequence_lengths`` (tuple of ints): the rows are consecutive, time-ordered
  segments of these lengths (an on-policy helper's cached steps; the wrapper
  concatenates the segments of several agents). None: every row is its own
  segment (replay samples), and the wrapper learns the batch as an update of
  its own.
- ``bootstrap_steps`` (float32 ``[B, 1]``): env steps from ``inputs`` to
  ``next_inputs`` (n-step replay). None: 1.
- ``weights`` (float32 ``[B, 1]``): importance-sampling weights (prioritized
  replay). None: 1.

and where it was recorded, what acted:

- ``behaviour_version`` (int64 ``[B, 1]``): the weights version (the task's
  updates learned, or a Ray worker's broadcast version) each row's action was
  predicted with; the learner counts how many versions behind a segment is
  (its staleness). None: not recorded.

In the batch ``learn`` receives, ``sequence_lengths`` is always set
(``(1,) * B`` for replay samples), ``weights`` is None when every weight is 1
and ``bootstrap_steps`` is None when the helper sent none; algorithms read the
last two through :meth:`Transition.discount` and :meth:`Transition.weighted_mean`.
"""

from __future__ import annotations

from typing import Callable, Dict, Generic, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union, cast

import numpy as np
import paddle

#: The array kind of a Transition: ``np.ndarray`` on the agent side, ``paddle.Tensor`` in learn.
A = TypeVar("A", bound=Union[np.ndarray, paddle.Tensor])
Out = TypeVar("Out", bound=Union[np.ndarray, paddle.Tensor])


class Transition(NamedTuple, Generic[A]):
    """One transition, or a batch of them (see the module docstring for each field).

    A NamedTuple, so it is immutable, cheap to make every step and to pickle
    across processes; derive a changed copy with ``_replace``.
    """

    inputs: Mapping[str, A]
    actions: Mapping[str, A]
    rewards: Mapping[str, A]
    next_inputs: Mapping[str, A]
    next_episode_end: A
    states: Mapping[str, A]
    next_states: Mapping[str, A]
    sequence_lengths: Optional[Tuple[int, ...]] = None
    bootstrap_steps: Optional[A] = None
    weights: Optional[A] = None
    behaviour_version: Optional[A] = None

    @property
    def batch_size(self) -> int:
        """Number of rows (1 for a single transition)."""
        return int(self.next_episode_end.shape[0])

    @property
    def uniform_weights(self) -> bool:
        """True when no row carries an importance weight (every weight is 1): ``weights`` is None."""
        return self.weights is None

    def discount(self, gamma: float) -> paddle.Tensor:
        """``gamma ** bootstrap_steps`` ``[B, 1]``: the factor on each row's bootstrapped value
        (``gamma`` on every row when ``bootstrap_steps`` is None). For a batch of tensors."""
        steps = cast(Optional[paddle.Tensor], self.bootstrap_steps)
        if steps is None:
            return paddle.full([self.batch_size, 1], gamma, dtype="float32")
        return paddle.pow(paddle.full_like(steps, gamma), steps)

    def weighted_mean(self, per_row: paddle.Tensor) -> paddle.Tensor:
        """Mean of ``[B, 1]`` per-row values, each weighted by its importance weight (prioritized
        replay); the plain mean when ``weights`` is None. For a batch of tensors."""
        return per_row.mean() if self.weights is None else (per_row * self.weights).mean()

    def to_tensors(
        self, convert: Callable[[np.ndarray], paddle.Tensor] = paddle.to_tensor
    ) -> "Transition[paddle.Tensor]":
        """This numpy batch as the batch ``Algorithm.learn`` receives: every array through ``convert``
        (``paddle.to_tensor`` by default), ``sequence_lengths`` filled in, ``bootstrap_steps`` and
        ``weights`` as float32 ``[B, 1]``, and ``weights`` None when every weight is 1.

        Raises:
            ValueError: the sequence lengths are not positive or do not sum to the batch size, or
                ``bootstrap_steps`` or ``weights`` has another number of rows than the batch.
        """
        batch = cast("Transition[np.ndarray]", self)
        rows = batch.batch_size
        if batch.sequence_lengths is None:
            lengths: Tuple[int, ...] = (1,) * rows
        else:
            lengths = tuple(int(n) for n in batch.sequence_lengths)
            if sum(lengths) != rows or min(lengths, default=1) < 1:
                raise ValueError(f"sequence_lengths {list(lengths)} must be positive and sum to the batch size {rows}")
        steps = _row_column("bootstrap_steps", batch.bootstrap_steps, rows)
        weights = _row_column("weights", batch.weights, rows)
        versions = _row_column("behaviour_version", batch.behaviour_version, rows, np.int64)
        if weights is not None and bool(np.all(weights == 1.0)):
            weights = None
        return batch._replace(
            sequence_lengths=lengths, bootstrap_steps=steps, weights=weights, behaviour_version=versions
        ).map_arrays(convert)

    def map_arrays(self, fn: Callable[[A], Out]) -> "Transition[Out]":
        """A Transition of ``fn(array)`` for every array (``sequence_lengths`` and absent fields kept)."""
        return Transition(
            **{field: {k: fn(v) for k, v in getattr(self, field).items()} for field in DICT_FIELDS},
            next_episode_end=fn(self.next_episode_end),
            sequence_lengths=self.sequence_lengths,
            bootstrap_steps=None if self.bootstrap_steps is None else fn(self.bootstrap_steps),
            weights=None if self.weights is None else fn(self.weights),
            behaviour_version=None if self.behaviour_version is None else fn(self.behaviour_version),
        )


#: The fields of a Transition that hold a dict of arrays by spec name.
DICT_FIELDS = ("inputs", "actions", "rewards", "next_inputs", "states", "next_states")


def join(
    parts: Sequence[Transition[np.ndarray]],
    join_arrays: Callable[[List[np.ndarray]], np.ndarray],
    *,
    sequence_lengths: Optional[Tuple[int, ...]] = None,
    bootstrap_steps: Optional[np.ndarray] = None,
    weights: Optional[np.ndarray] = None,
    behaviour_version: Optional[np.ndarray] = None,
) -> Transition[np.ndarray]:
    """One Transition whose every array is ``join_arrays`` of the parts' arrays of that field and spec
    name, in order (``np.stack``: single transitions into a batch; ``np.concatenate``: batches into
    one), with the given row structure (the parts' own is not read)."""

    def joined(field: str) -> Dict[str, np.ndarray]:
        dicts: List[Mapping[str, np.ndarray]] = [getattr(p, field) for p in parts]
        return {name: join_arrays([d[name] for d in dicts]) for name in dicts[0]}

    return Transition(
        **{field: joined(field) for field in DICT_FIELDS},
        next_episode_end=join_arrays([p.next_episode_end for p in parts]),
        sequence_lengths=sequence_lengths,
        bootstrap_steps=bootstrap_steps,
        weights=weights,
        behaviour_version=behaviour_version,
    )


def check_transition(value: object, what: str) -> Transition:
    """``value`` when it is a :class:`Transition`.

    Raises:
        ValueError: it is something else (a dict of fields, say); the message names its type and ``what``.
    """
    if not isinstance(value, Transition):
        raise ValueError(f"{what}: expected a parl.core.batch.Transition, got {type(value).__name__}")
    return value


def _row_column(field: str, value: Optional[np.ndarray], rows: int, dtype: type = np.float32) -> Optional[np.ndarray]:
    """``value`` as a ``[rows, 1]`` array of ``dtype`` (None stays None)."""
    if value is None:
        return None
    column: np.ndarray = np.asarray(value, dtype=dtype).reshape(-1, 1)
    if column.shape[0] != rows:
        raise ValueError(f"{field} has {column.shape[0]} rows, the batch has {rows}")
    return column
