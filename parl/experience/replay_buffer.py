"""ReplayBuffer: a fixed-size ring of transitions with uniform sampling.

    buffer = ReplayBuffer(10000, input_specs, state_specs, action_specs, reward_specs)
    slot = buffer.add(transition)          # one checked Transition; returns its slot
    batch = buffer.sample(64, rng)         # a Transition of 64 rows, for ComputationTask.learn
    batch = buffer.gather(slots)           # the stored rows ``slots``, batched

Storage is preallocated numpy, one array per spec, so adding and sampling
cost a few array copies and no Python objects per transition. With
``bootstrap_steps=True`` each transition also keeps the env steps it spans
(n-step returns, :mod:`parl.experience.n_step`) and batches carry them as the
optional ``bootstrap_steps`` field of :class:`~parl.core.batch.Transition`.
With ``frame_inputs`` the inputs named there, frame-stacked observations, are
kept in a :class:`~parl.experience.frame_store.FrameStore` per name, shared by
``inputs`` and ``next_inputs``, which keeps each frame once and gives every
stack back bit-identical.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Dict, Mapping, Sequence

import numpy as np

from parl.core.batch import Transition
from parl.core.specs import Spec
from parl.experience.frame_store import FrameStore
from parl.validation import check_int

# Transition field -> which spec list shapes it.
_FIELD_SPECS = {
    "inputs": "input",
    "next_inputs": "input",
    "states": "state",
    "next_states": "state",
    "actions": "action",
    "rewards": "reward",
}


class ReplayBuffer:
    """Uniform experience replay over transitions shaped by a model's specs.

    Args:
        capacity: transitions kept; the oldest is overwritten first.
        input_specs, state_specs, action_specs, reward_specs: the model's specs.
        bootstrap_steps: also store each transition's ``bootstrap_steps`` (1 where a transition has
            none) and return them in every batch.
        frame_inputs: the input specs (by name) to keep as frame stacks, each of shape ``[k, *frame_shape]``
            with the stacking axis first and the newest frame last: a frame shared by consecutive
            observations is stored once (:class:`~parl.experience.frame_store.FrameStore`). Other
            observations are kept exactly too, at the memory of plain arrays or more.

    Raises:
        ValueError: a name in ``frame_inputs`` is not an input spec's, or its spec has fewer than 2 dimensions.
    """

    def __init__(
        self,
        capacity: int,
        input_specs: Sequence[Spec],
        state_specs: Sequence[Spec],
        action_specs: Sequence[Spec],
        reward_specs: Sequence[Spec],
        *,
        bootstrap_steps: bool = False,
        frame_inputs: Sequence[str] = (),
    ) -> None:
        self.capacity = check_int("capacity", capacity, 1)
        self._frames = _frame_stores(input_specs, frame_inputs, self.capacity)
        by_kind = {"input": input_specs, "state": state_specs, "action": action_specs, "reward": reward_specs}
        self._storage: Dict[str, Dict[str, np.ndarray]] = {
            field: {
                s.name: np.zeros((self.capacity,) + s.shape, dtype=s.dtype)
                for s in by_kind[kind]
                if not (kind == "input" and s.name in self._frames)
            }
            for field, kind in _FIELD_SPECS.items()
        }
        # The frame ids of each slot's stacks, by field and input name.
        self._frame_ids: Dict[str, Dict[str, np.ndarray]] = {
            field: {
                name: np.zeros((self.capacity, store.frames_per_stack), np.int32)
                for name, store in self._frames.items()
            }
            for field in ("inputs", "next_inputs")
        }
        self._episode_end = np.zeros((self.capacity, 1), dtype=np.float32)
        self._bootstrap_steps = np.ones((self.capacity, 1), dtype=np.float32) if bootstrap_steps else None
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def frame_stores(self) -> Mapping[str, FrameStore]:
        """The :class:`~parl.experience.frame_store.FrameStore` of each input kept as frame stacks, by name
        (its memory accounting: ``frames_in_use``, ``bytes_in_use``)."""
        return MappingProxyType(self._frames)

    def add(self, transition: Transition[np.ndarray]) -> int:
        """Store one transition (single samples; with ``bootstrap_steps=True`` its ``bootstrap_steps``,
        1 when None); returns the slot it went to."""
        i = self._next
        # The new stacks are held before the overwritten ones are let go, so a stack refused half way
        # leaves every slot as it was.
        added = {
            field: {name: self._frames[name].add_stack(getattr(transition, field)[name]) for name in id_arrays}
            for field, id_arrays in self._frame_ids.items()
        }
        for field, id_arrays in self._frame_ids.items():
            for name, ids in id_arrays.items():
                if i < self._size:
                    self._frames[name].release(ids[i])
                ids[i] = added[field][name]
        for field, arrays in self._storage.items():
            values = getattr(transition, field)
            for name, store in arrays.items():
                store[i] = values[name]
        self._episode_end[i] = transition.next_episode_end
        if self._bootstrap_steps is not None:
            steps = transition.bootstrap_steps
            self._bootstrap_steps[i] = 1.0 if steps is None else steps
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        return i

    def sample(self, batch_size: int, rng: np.random.Generator) -> Transition[np.ndarray]:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self.gather(rng.integers(0, self._size, size=batch_size))

    def gather(self, slots: np.ndarray) -> Transition[np.ndarray]:
        """The transitions in ``slots`` (slots returned by :meth:`add`), as one batch of copies.

        Raises:
            ValueError: a slot holds no transition.
        """
        slots = np.asarray(slots)
        if slots.size and (slots.min() < 0 or slots.max() >= self._size):
            raise ValueError(f"replay slots must be in [0, {self._size}) (the stored transitions), got {slots}")
        fields: Dict[str, Any] = {
            field: {name: store[slots] for name, store in arrays.items()} for field, arrays in self._storage.items()
        }
        for field, id_arrays in self._frame_ids.items():
            fields[field].update((name, self._frames[name].gather(ids[slots])) for name, ids in id_arrays.items())
        return Transition(
            **fields,
            next_episode_end=self._episode_end[slots],
            bootstrap_steps=None if self._bootstrap_steps is None else self._bootstrap_steps[slots],
        )


def _frame_stores(input_specs: Sequence[Spec], names: Sequence[str], capacity: int) -> Dict[str, FrameStore]:
    """A FrameStore per input spec named in ``names``, for ``capacity`` transitions, by name (in the specs' order).

    Raises:
        ValueError: a name is not an input spec's, or its spec has fewer than 2 dimensions.
    """
    if isinstance(names, str):
        raise ValueError(f"frame_inputs must be a sequence of input names, got the string {names!r}")
    by_name = {spec.name: spec for spec in input_specs}
    for name in names:
        if name not in by_name:
            raise ValueError(f"frame_inputs names {name!r}, which is not an input spec (inputs: {sorted(by_name)})")
        if len(by_name[name].shape) < 2:
            raise ValueError(
                f"frame_inputs names {name!r}, whose shape {list(by_name[name].shape)} is no stack [k, *frame_shape]"
            )
    return {
        spec.name: FrameStore(spec.shape, spec.dtype, transitions=capacity, name=spec.name)
        for spec in input_specs
        if spec.name in names
    }
