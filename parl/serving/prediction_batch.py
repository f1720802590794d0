"""One prediction batch: how requests' samples are stacked into a task's inputs, and how its outputs
are split back into one reply per request. Every placement batches as this module says.

    layout = BatchLayout(task.specs)
    inputs, states = stack_samples(layout, [inputs_0, inputs_1], [states_0, states_1])
    actions, next_states = task.predict(inputs, states)
    replies = split_replies(actions, next_states, 2)      # [(actions_0, next_states_0), (...)]

The samples stacked are those that fit the specs exactly (a numpy array of the spec's shape and
dtype for each spec, and nothing else: :meth:`BatchLayout.fits`); a transport checks and converts
each sample at its door first. A reply holds row views of the batch's outputs, no copies.

This is plain numpy. The cooperative placement reaches the same batches and replies by faster
ways (``parl.runtime.cooperative.batching`` and its C extension): accelerators of these functions,
held to them by tests/test_prediction_batch.py.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from parl.core.specs import Layout, all_finite, fits, layout
from parl.core.task_specs import TaskSpecs

ArrayDict = Dict[str, np.ndarray]
#: One request's share of a prediction batch: its actions and next states.
Row = Tuple[ArrayDict, ArrayDict]


class BatchLayout:
    """A task's prediction specs as batching reads them.

    Attributes:
        specs: the task's specs.
        inputs, states: ``(name, shape, dtype)`` of each input and state spec.
        ranged: whether a spec declares a value range (which only the full sample check reads).
        one_input: the common case, ``(name, shape, dtype)`` of the one input spec (of at least one
            dimension) when there is no state spec and no range; None otherwise.
        float_inputs, float_states: the names of the float specs, whose values must be finite.
    """

    __slots__ = ("specs", "inputs", "states", "ranged", "one_input", "float_inputs", "float_states")

    def __init__(self, specs: TaskSpecs) -> None:
        self.specs = specs
        self.inputs: Layout = layout(specs.inputs)
        self.states: Layout = layout(specs.states)
        self.ranged = any(not s.floating and s.value_range is not None for s in specs.inputs + specs.states)
        one = len(self.inputs) == 1 and not self.states and self.inputs[0][1] and not self.ranged
        self.one_input: Optional[Tuple[str, Tuple[int, ...], np.dtype]] = self.inputs[0] if one else None
        self.float_inputs = [s.name for s in specs.inputs if s.floating]
        self.float_states = [s.name for s in specs.states if s.floating]

    def fits(self, inputs: object, states: object) -> bool:
        """Whether a sample's ``inputs`` and ``states`` (a dict; None or empty for no states) can be
        stacked as they are: exactly the specs' names, each a numpy array of its spec's shape and dtype."""
        return fits(self.inputs, inputs) and fits(self.states, states or {})

    def all_finite(self, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray]) -> bool:
        """Whether the float inputs and states of a stacked batch are all finite."""
        return all(all_finite(inputs[name]) for name in self.float_inputs if name in inputs) and all(
            all_finite(states[name]) for name in self.float_states if name in states
        )


def stack_spec(values: Sequence[np.ndarray], n: int, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The ``n`` samples of one spec (each of ``shape`` and ``dtype``) as one fresh ``[n, *shape]``
    array: ``np.stack(values)``, the same bytes, by the fastest way measured (joining them end to
    end and reshaping)."""
    if not shape:
        return np.array(values, dtype)
    return np.concatenate(values).reshape((n,) + shape)


def stack_samples(
    batch_layout: BatchLayout, inputs: Sequence[Mapping[str, np.ndarray]], states: Sequence[Mapping[str, np.ndarray]]
) -> Tuple[ArrayDict, ArrayDict]:
    """The samples ``inputs[i]``, ``states[i]`` of a batch (each fitting :meth:`BatchLayout.fits`)
    stacked by spec, in spec order; ``states`` is read only when there are state specs."""
    n = len(inputs)
    if not n:
        return {}, {}
    stacked = {
        name: stack_spec([sample[name] for sample in inputs], n, shape, dtype)
        for name, shape, dtype in batch_layout.inputs
    }
    if not batch_layout.states:
        return stacked, {}
    return stacked, {
        name: stack_spec([sample[name] for sample in states], n, shape, dtype)
        for name, shape, dtype in batch_layout.states
    }


def check_rows(actions: Mapping[str, np.ndarray], next_states: Mapping[str, np.ndarray], n: int) -> None:
    """Check that a prediction answered one row per request of its batch of ``n``.

    Raises:
        ValueError: naming the output and its number of rows.
    """
    for name, values in (*actions.items(), *next_states.items()):
        if len(values) != n:
            raise ValueError(f"the task answered {len(values)} rows of {name!r} for a batch of {n}")


def split_replies(actions: Mapping[str, np.ndarray], next_states: Mapping[str, np.ndarray], n: int) -> List[Row]:
    """Each of the ``n`` requests' reply: its row of every action and next state (views, no copies),
    in batch order, each in a dict of its own.

    Raises:
        ValueError: the task answered another number of rows than ``n`` (:func:`check_rows`).
    """
    check_rows(actions, next_states, n)
    if len(actions) == 1 and not next_states:
        ((name, values),) = actions.items()
        return [({name: row}, {}) for row in values]
    return list(zip(_split(actions, n), _split(next_states, n)))


def _split(batch: Mapping[str, np.ndarray], n: int) -> List[ArrayDict]:
    if not batch:
        return [{} for _ in range(n)]
    names = list(batch)
    return [dict(zip(names, row)) for row in zip(*batch.values())]
