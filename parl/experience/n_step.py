"""NStepAccumulator: turns one agent's 1-step transitions into n-step ones.

    accumulator = NStepAccumulator(3, gamma=0.99)
    for transition, episode_over in one_agent_steps:
        for n_step_transition in accumulator.add(transition, episode_over):
            buffer.add(n_step_transition)

The n-step transition of step t spans ``m`` env steps:

    inputs, states, actions        of step t
    rewards                        sum_{k < m} gamma^k r_{t+k}     (each reward spec on its own)
    next_inputs, next_states,
    next_episode_end               of step t + m - 1
    bootstrap_steps                m

so an algorithm's target ``rewards + gamma^m (1 - next_episode_end) V(next_inputs)``
(``batch.discount(gamma)``) is the n-step return. ``m = n`` while the episode
goes on; when it ends (terminated or truncated) the steps still waiting (up to
``n``, the last one included) are flushed, each reaching to the episode's end,
with ``m = n, n - 1, ..., 1``. After a termination ``next_episode_end``
is 1 and nothing is bootstrapped; after a truncation it is 0 and the target
bootstraps from the last input, ``m`` steps on.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, List

import numpy as np

from parl.core.batch import Transition
from parl.validation import check_int, check_range


class NStepAccumulator:
    """Holds the last ``n - 1`` transitions of an episode and emits each as soon as its n-step return is known.

    Args:
        n: steps per return (1 passes transitions through, with ``bootstrap_steps`` 1).
        gamma: discount of the reward sums; must be the algorithm's.
    """

    def __init__(self, n: int, *, gamma: float) -> None:
        self.n = check_int("n_step", n, 1)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)
        self._discounts = self.gamma ** np.arange(self.n, dtype=np.float64)
        self._pending: Deque[Transition[np.ndarray]] = deque()

    def __len__(self) -> int:
        """Transitions waiting for later rewards."""
        return len(self._pending)

    def clear(self) -> None:
        """Drop the pending transitions (their episode ended without its last step)."""
        self._pending.clear()

    def add(self, transition: Transition[np.ndarray], episode_over: bool) -> List[Transition[np.ndarray]]:
        """Take one step's 1-step transition; return the n-step transitions it completes, oldest first.

        ``episode_over`` (terminated or truncated) flushes every pending transition.
        The arrays are copied, so the caller may reuse its own.
        """
        self._pending.append(copy_transition(transition))
        ready: List[Transition[np.ndarray]] = []
        if episode_over:
            while self._pending:
                ready.append(self._pop(len(self._pending)))
        elif len(self._pending) == self.n:
            ready.append(self._pop(self.n))
        return ready

    def _pop(self, steps: int) -> Transition[np.ndarray]:
        """The transition of the oldest pending step spanning ``steps`` steps; drops that step."""
        window = [self._pending[k] for k in range(steps)]
        first, last = window[0], window[-1]
        out = Transition(
            inputs=first.inputs,
            actions=first.actions,
            rewards={name: self._discounted_sum(window, name) for name in first.rewards},
            next_inputs=last.next_inputs,
            next_episode_end=last.next_episode_end,
            states=first.states,
            next_states=last.next_states,
            bootstrap_steps=np.array([steps], dtype=np.float32),
        )
        self._pending.popleft()
        return out

    def _discounted_sum(self, window: List[Transition[np.ndarray]], name: str) -> np.ndarray:
        """``sum_k gamma^k r_k`` of reward ``name`` over ``window``, summed in float64, in the reward's dtype."""
        total = sum(self._discounts[k] * t.rewards[name].astype(np.float64) for k, t in enumerate(window))
        return total.astype(window[0].rewards[name].dtype)


def copy_transition(transition: Transition[np.ndarray]) -> Transition[np.ndarray]:
    """A deep copy of one transition's arrays (agents may reuse their buffers in place)."""
    return transition.map_arrays(np.array)  # np.array copies by default
