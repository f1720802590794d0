"""ReplayBuffer: a fixed-size ring of transitions with uniform sampling.

    buffer = ReplayBuffer(10000, input_specs, state_specs, action_specs, reward_specs)
    buffer.add(transition)                 # one checked sample per field
    batch = buffer.sample(64, rng)         # fields of ComputationTask.learn, batched

Storage is preallocated numpy, one array per spec, so adding and sampling
cost a few array copies and no Python objects per transition.
"""

from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np

from parl.framework.specs import Spec
from parl.framework.validation import check_int

# Field name -> which spec list shapes it.
_FIELD_SPECS = {
    "inputs": "input",
    "next_inputs": "input",
    "states": "state",
    "next_states": "state",
    "actions": "action",
    "rewards": "reward",
}


class ReplayBuffer:
    """Uniform experience replay over transitions shaped by a model's specs."""

    def __init__(
        self,
        capacity: int,
        input_specs: Sequence[Spec],
        state_specs: Sequence[Spec],
        action_specs: Sequence[Spec],
        reward_specs: Sequence[Spec],
    ) -> None:
        self.capacity = check_int("capacity", capacity, 1)
        by_kind = {"input": input_specs, "state": state_specs, "action": action_specs, "reward": reward_specs}
        self._storage: Dict[str, Dict[str, np.ndarray]] = {
            field: {s.name: np.zeros((self.capacity,) + s.shape, dtype=s.dtype) for s in by_kind[kind]}
            for field, kind in _FIELD_SPECS.items()
        }
        self._episode_end = np.zeros((self.capacity, 1), dtype=np.float32)
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, transition: Mapping[str, object]) -> None:
        """Store one transition: a dict per field of single samples plus ``next_episode_end``."""
        i = self._next
        for field, arrays in self._storage.items():
            values = transition[field]
            for name, store in arrays.items():
                store[i] = values[name]
        self._episode_end[i] = transition["next_episode_end"]
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Dict[str, object]:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, self._size, size=batch_size)
        batch: Dict[str, object] = {
            field: {name: store[idx] for name, store in arrays.items()} for field, arrays in self._storage.items()
        }
        batch["next_episode_end"] = self._episode_end[idx]
        return batch
