"""BatchInfo: how the rows of a training batch relate to each other.

Helpers describe their batches with three optional numpy fields next to the
:data:`~parl.serving.computation_task.BATCH_FIELDS`; the task turns them
into one :class:`BatchInfo` passed to ``Algorithm.learn``:

- ``sequence_lengths`` (int64 ``[S]``): the rows are ``S`` consecutive,
  time-ordered segments of these lengths (an on-policy helper's cached steps;
  the wrapper concatenates the segments of several agents). Absent: every row
  is its own segment of length 1 (replay samples).
- ``bootstrap_steps`` (float32 ``[B, 1]``): env steps from ``inputs`` to
  ``next_inputs`` (n-step replay). Absent: 1.
- ``weights`` (float32 ``[B, 1]``): importance-sampling weights (prioritized
  replay). Absent: 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np
import paddle

#: Optional batch fields that describe rows, with the value a batch without them implies.
INFO_FIELDS = ("sequence_lengths", "bootstrap_steps", "weights")


@dataclass(frozen=True)
class BatchInfo:
    """Row structure of one training batch (see the module docstring).

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


def default_info_arrays(batch_size: int) -> dict:
    """The info fields of a batch that sets none of them."""
    return {
        "sequence_lengths": np.ones(batch_size, dtype=np.int64),
        "bootstrap_steps": np.ones((batch_size, 1), dtype=np.float32),
        "weights": np.ones((batch_size, 1), dtype=np.float32),
    }


def make_batch_info(batch: Mapping[str, object], batch_size: int, to_tensor) -> BatchInfo:
    """The BatchInfo of a numpy batch (fields it lacks take their defaults).

    Raises:
        ValueError: the sequence lengths do not sum to the batch size, or a field has the wrong shape.
    """
    lengths: Optional[np.ndarray] = batch.get("sequence_lengths")  # type: ignore[assignment]
    if lengths is None:
        seq = (1,) * batch_size
    else:
        seq = tuple(int(n) for n in np.asarray(lengths).reshape(-1))
        if sum(seq) != batch_size or min(seq, default=1) < 1:
            raise ValueError(f"sequence_lengths {list(seq)} must be positive and sum to the batch size {batch_size}")
    arrays = {}
    for field in ("bootstrap_steps", "weights"):
        value = batch.get(field)
        if value is None:
            arrays[field] = None
            continue
        value = np.asarray(value, dtype=np.float32).reshape(-1, 1)
        if value.shape[0] != batch_size:
            raise ValueError(f"{field} has {value.shape[0]} rows, the batch has {batch_size}")
        arrays[field] = value
    ones = np.ones((batch_size, 1), dtype=np.float32)
    steps = arrays["bootstrap_steps"]
    weights = arrays["weights"]
    return BatchInfo(
        sequence_lengths=seq,
        bootstrap_steps=to_tensor(ones if steps is None else steps),
        weights=to_tensor(ones if weights is None else weights),
        uniform_weights=weights is None or bool(np.all(weights == 1.0)),
    )


def batch_info(
    batch_size: int,
    *,
    sequence_lengths: Optional[Sequence[int]] = None,
    bootstrap_steps: Optional[np.ndarray] = None,
    weights: Optional[np.ndarray] = None,
) -> BatchInfo:
    """A BatchInfo built from numpy values, for calling ``Algorithm.learn`` directly (tests, notebooks)."""
    fields = {"sequence_lengths": sequence_lengths, "bootstrap_steps": bootstrap_steps, "weights": weights}
    return make_batch_info({k: v for k, v in fields.items() if v is not None}, batch_size, paddle.to_tensor)
