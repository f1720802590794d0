"""PrioritizedReplayBuffer: proportional prioritized replay (Schaul et al., 2016).

    buffer = PrioritizedReplayBuffer(10000, input_specs, state_specs, action_specs, reward_specs)
    buffer.add(transition)                          # enters with the largest priority seen so far
    batch, slots = buffer.sample(64, rng)           # batch.weights: importance weights [64, 1]
    costs = ...learn on batch...
    buffer.update_priorities(slots, costs["td_error"])

Transition i is drawn with probability ``P(i) = p_i^alpha / sum_k p_k^alpha``
where ``p_i = |td_error_i| + epsilon`` from its last update (new transitions
get the largest ``p`` seen so far, so each is replayed at least about once).
The bias this brings is corrected by importance weights
``w_i = (N * P(i))^-beta / max_k w_k``, with the maximum over all ``N``
stored transitions, so weights only scale updates down. ``beta`` grows
linearly from ``beta_start`` to 1 over the first ``beta_steps`` transitions
added. Sampling is stratified: one draw from each of ``batch_size`` equal
segments of the priority mass.
"""

from __future__ import annotations

import warnings
from typing import Mapping, Protocol, Sequence, Tuple, Union

import numpy as np

from parl.core.batch import Transition
from parl.core.specs import Spec
from parl.core.task_specs import TaskSpecs
from parl.experience.frame_store import FrameStore, FrameStoreSetting, frame_stack_inputs
from parl.experience.replay_buffer import ReplayBuffer
from parl.experience.sum_tree import SumTree
from parl.validation import check_int, check_positive, check_range


class PrioritizedReplayBuffer:
    """Experience replay that draws transitions in proportion to their priority.

    Args:
        capacity: transitions kept; the oldest is overwritten first.
        input_specs, state_specs, action_specs, reward_specs: the model's specs.
        alpha: priority exponent, in [0, 1]; 0 samples uniformly. 0.6: the paper's proportional variant.
        beta_start: importance-weight exponent at the start, in [0, 1]. 0.4: the paper's.
        beta_steps: transitions added over which beta reaches 1 (0: 1 from the start).
        epsilon: added to ``|td_error|`` so no transition's priority is 0.
        bootstrap_steps: store and return per-transition ``bootstrap_steps`` (see :class:`ReplayBuffer`).
        frame_inputs: the input specs (by name) kept as frame stacks (see :class:`ReplayBuffer`).
    """

    def __init__(
        self,
        capacity: int,
        input_specs: Sequence[Spec],
        state_specs: Sequence[Spec],
        action_specs: Sequence[Spec],
        reward_specs: Sequence[Spec],
        *,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_steps: int = 100_000,
        epsilon: float = 1e-6,
        bootstrap_steps: bool = False,
        frame_inputs: Sequence[str] = (),
    ) -> None:
        self.alpha = check_range("alpha", alpha, 0.0, 1.0)
        self.beta_start = check_range("beta_start", beta_start, 0.0, 1.0)
        self.beta_steps = check_int("beta_steps", beta_steps, 0)
        self.epsilon = check_positive("epsilon", epsilon)
        self._storage = ReplayBuffer(
            capacity,
            input_specs,
            state_specs,
            action_specs,
            reward_specs,
            bootstrap_steps=bootstrap_steps,
            frame_inputs=frame_inputs,
        )
        self.capacity = self._storage.capacity
        self._tree = SumTree(self.capacity)
        self._max_priority = 1.0  # the largest p = |td| + epsilon seen; new transitions get it
        self.added = 0

    def __len__(self) -> int:
        return len(self._storage)

    @property
    def frame_stores(self) -> Mapping[str, FrameStore]:
        """The frame store of each input kept as frame stacks, by name (see :attr:`ReplayBuffer.frame_stores`)."""
        return self._storage.frame_stores

    @property
    def beta(self) -> float:
        """The importance-weight exponent now: ``beta_start`` moving linearly to 1 over ``beta_steps`` adds."""
        if self.beta_steps == 0:
            return 1.0
        return self.beta_start + (1.0 - self.beta_start) * min(self.added / self.beta_steps, 1.0)

    def add(self, transition: Transition[np.ndarray]) -> int:
        """Store one transition (as :meth:`ReplayBuffer.add`) with the largest priority seen; returns its slot."""
        slot = self._storage.add(transition)
        self._tree.update(np.array([slot]), np.array([self._max_priority**self.alpha]))
        self.added += 1
        return slot

    def priorities(self, slots: np.ndarray) -> np.ndarray:
        """``p^alpha`` of the transitions in ``slots`` (their unnormalized sampling weights)."""
        return self._tree.get(slots)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Tuple[Transition[np.ndarray], np.ndarray]:
        """``batch_size`` transitions drawn by priority, and their slots (for :meth:`update_priorities`).

        The batch carries ``weights`` (float32 ``[batch_size, 1]``): the importance weights at the
        current :attr:`beta`.

        Raises:
            ValueError: the buffer is empty.
        """
        if len(self._storage) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        slots = self._tree.sample(batch_size, rng)
        # (N P(i))^-beta / max_k (N P(k))^-beta = (p_i / p_min)^-beta: N and the total cancel.
        ratio = self._tree.get(slots) / self._tree.min
        weights = (ratio**-self.beta).astype(np.float32).reshape(-1, 1)
        return self._storage.gather(slots)._replace(weights=weights), slots

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """Give the transitions in ``slots`` the priorities ``|td_errors| + epsilon`` (one per slot).

        Raises:
            ValueError: the lengths differ, a TD error is not finite, or a slot holds no transition.
        """
        slots = np.asarray(slots).reshape(-1)
        td_errors = np.asarray(td_errors, dtype=np.float64).reshape(-1)
        if td_errors.shape != slots.shape:
            raise ValueError(f"update_priorities got {slots.size} slots and {td_errors.size} TD errors")
        if not np.all(np.isfinite(td_errors)):
            raise ValueError(f"TD errors must be finite to be priorities, got {td_errors[~np.isfinite(td_errors)]}")
        if slots.size and (slots.min() < 0 or slots.max() >= len(self._storage)):
            raise ValueError(f"replay slots must be in [0, {len(self._storage)}) (the stored transitions), got {slots}")
        priorities = np.abs(td_errors) + self.epsilon
        if priorities.size:
            self._max_priority = max(self._max_priority, float(priorities.max()))
        self._tree.update(slots, priorities**self.alpha)


def make_replay_buffer(
    capacity: int,
    specs: Union[TaskSpecs, Sequence[Sequence[Spec]]],
    *,
    prioritized: bool,
    alpha: float,
    beta_start: float,
    beta_steps: int,
    epsilon: float,
    bootstrap_steps: bool,
    frame_inputs: Sequence[str] = (),
) -> Union[ReplayBuffer, PrioritizedReplayBuffer]:
    """A :class:`PrioritizedReplayBuffer` (``prioritized``) or a uniform :class:`ReplayBuffer` of
    ``capacity`` transitions shaped by ``specs`` (a task's input, state, action and reward specs), keeping the
    inputs named in ``frame_inputs`` as frame stacks; the priority settings are read only when prioritized.
    A tuple of the four spec lists is still taken, with a DeprecationWarning."""
    if not isinstance(specs, TaskSpecs):
        warnings.warn(
            "make_replay_buffer: a tuple of four spec lists is deprecated; pass a parl.core.task_specs.TaskSpecs",
            DeprecationWarning,
            stacklevel=2,
        )
        specs = TaskSpecs(*(list(group) for group in specs))
    lists = (specs.inputs, specs.states, specs.actions, specs.rewards)  # the buffers' own signature
    if prioritized:
        return PrioritizedReplayBuffer(
            capacity,
            *lists,
            alpha=alpha,
            beta_start=beta_start,
            beta_steps=beta_steps,
            epsilon=epsilon,
            bootstrap_steps=bootstrap_steps,
            frame_inputs=frame_inputs,
        )
    return ReplayBuffer(capacity, *lists, bootstrap_steps=bootstrap_steps, frame_inputs=frame_inputs)


class ReplayBufferSettings(Protocol):
    """What :func:`replay_buffer_for` reads: an :class:`~parl.ExpReplayHelper` has these attributes, and so
    has a distributed replay's shard settings (:class:`~parl.runtime.ray.replay.ReplaySettings`)."""

    capacity: int
    prioritized: bool
    alpha: float
    beta_start: float
    beta_steps: int
    priority_epsilon: float
    frame_store: FrameStoreSetting


def replay_buffer_for(
    settings: ReplayBufferSettings, specs: TaskSpecs, *, bootstrap_steps: bool
) -> Union[ReplayBuffer, PrioritizedReplayBuffer]:
    """:func:`make_replay_buffer` with ``settings``' capacity and priority settings, keeping as frame stacks
    the input specs that ``settings.frame_store`` picks.

    Raises:
        ValueError: ``frame_store`` is True and no input spec is a frame stack.
    """
    return make_replay_buffer(
        settings.capacity,
        specs,
        prioritized=settings.prioritized,
        alpha=settings.alpha,
        beta_start=settings.beta_start,
        beta_steps=settings.beta_steps,
        epsilon=settings.priority_epsilon,
        bootstrap_steps=bootstrap_steps,
        frame_inputs=frame_stack_inputs(specs.inputs, settings.frame_store),
    )
