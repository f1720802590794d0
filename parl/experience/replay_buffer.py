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
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

from parl.core.batch import Transition
from parl.core.specs import Spec
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
    ) -> None:
        self.capacity = check_int("capacity", capacity, 1)
        by_kind = {"input": input_specs, "state": state_specs, "action": action_specs, "reward": reward_specs}
        self._storage: Dict[str, Dict[str, np.ndarray]] = {
            field: {s.name: np.zeros((self.capacity,) + s.shape, dtype=s.dtype) for s in by_kind[kind]}
            for field, kind in _FIELD_SPECS.items()
        }
        self._episode_end = np.zeros((self.capacity, 1), dtype=np.float32)
        self._bootstrap_steps = np.ones((self.capacity, 1), dtype=np.float32) if bootstrap_steps else None
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, transition: Transition[np.ndarray]) -> int:
        """Store one transition (single samples; with ``bootstrap_steps=True`` its ``bootstrap_steps``,
        1 when None); returns the slot it went to."""
        i = self._next
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
        fields = {
            field: {name: store[slots] for name, store in arrays.items()} for field, arrays in self._storage.items()
        }
        return Transition(
            **fields,
            next_episode_end=self._episode_end[slots],
            bootstrap_steps=None if self._bootstrap_steps is None else self._bootstrap_steps[slots],
        )
