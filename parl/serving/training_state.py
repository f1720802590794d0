"""TrainingState and TaskLearners: a task that learns through learners elsewhere.

    task.learn_through(learners)       # learners: a TaskLearners (parl.runtime.task_learners)
    costs = task.learn(batch)          # normalized and reward-transformed here, learned there
    task.stop_learners()               # their last state (optimizer included) kept by the task

A :class:`~parl.ComputationTask` that learns through :class:`TaskLearners`
keeps serving predictions and owns the input normalizer, the reward
transforms and the checkpoints; each update's batch, transformed, goes to the
learners, and their :class:`TrainingState` after it (the weights, the
algorithm's state, the update count) comes back under the task's weights lock.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.costs import Costs


class TrainingState(NamedTuple):
    """What a task's updates change, as plain data that crosses processes.

    Attributes:
        weights: each model's weights by attribute name (no normalizer statistics).
        algorithm_state: :meth:`Algorithm.state <parl.Algorithm.state>`.
        update_steps: optimizer steps taken so far.
        skipped_updates: optimizer steps skipped so far for a non-finite loss or gradient.
        optimizer: the optimizer's state keyed by structure
            (:func:`~parl.serving.checkpoint_format.to_structural`); None: not asked for, or none yet.
        grad_norm_total: the gradient norms so far, as :attr:`ComputationTask.grad_norm_total
            <parl.ComputationTask.grad_norm_total>` counts them (learners track them always).
        learning_rate: the optimizer's learning rate now; None before its first update.
    """

    weights: Dict[str, Dict[str, Any]]
    algorithm_state: Dict[str, object]
    update_steps: int
    skipped_updates: int
    optimizer: Optional[Dict[str, Any]]
    grad_norm_total: Tuple[float, int, int] = (0.0, 0, 0)
    learning_rate: Optional[float] = None


class TaskLearners(Protocol):
    """Where a task's updates run (:meth:`ComputationTask.learn_through <parl.ComputationTask.learn_through>`)."""

    @property
    def running(self) -> bool:
        """Whether the learners are started (they start at :meth:`start`, stop at :meth:`close`)."""

    def start(self, state: TrainingState, generator: List[Any]) -> None:
        """Start the learners from ``state`` (optimizer included, when it has one), their random
        generators from ``generator`` (``paddle.get_rng_state("cpu")``)."""

    def update(self, batch: Transition[np.ndarray]) -> Tuple[Costs, TrainingState]:
        """Learn ``batch`` (already transformed); its costs and the state after it, without the optimizer's."""

    def training_state(self) -> TrainingState:
        """The learners' state, the optimizer's included."""

    def set_training_state(self, state: TrainingState) -> None:
        """Put every learner in ``state`` (a checkpoint restored by the task)."""

    def close(self) -> None:
        """Stop the learners (idempotent)."""
