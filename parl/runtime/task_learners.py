"""TaskLearnerProcesses: the learner processes a serving task learns through (``TaskSettings.learners``).

    learners = TaskLearnerProcesses(make_learner, count=2, device="cpu")  # make_learner: picklable
    task.learn_through(learners)   # started at the task's first update, from its state
    task.learn(batch)              # normalized here, learned by the 2 processes, weights taken back
    task.stop_learners()

The :class:`~parl.serving.training_state.TaskLearners` a
:class:`~parl.Manager` gives a task whose settings ask for ``learners`` > 1,
over :class:`~parl.runtime.learner_processes.LearnerProcesses`. The learners'
tasks are built by ``make_learner`` without input normalization or reward
transforms (the serving task applies them before a batch leaves);
:func:`learner_builder` makes one from :meth:`TaskSettings.learner_settings
<parl.TaskSettings.learner_settings>`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import cloudpickle
import numpy as np

from parl.core.batch import Transition
from parl.core.costs import Costs
from parl.runtime.learner_processes import LearnerProcesses
from parl.serving.computation_task import ComputationTask
from parl.serving.learner_collective import learner_device
from parl.serving.training_state import TrainingState
from parl.validation import check_int


class TaskLearnerProcesses:
    """``count`` learner processes for one serving task (see the module docstring).

    Args:
        make_learner: a picklable zero-argument callable building a learner's task (:func:`learner_builder`).
        count: learners, >= 1.
        device: "cpu", "gpu" (one GPU per learner) or "auto".
        seed: every learner's generators' seed before it takes the serving task's CPU generator state.

    Raises:
        ValueError: a bad ``count`` or ``device`` (no process starts before the first update).
    """

    def __init__(
        self, make_learner: Callable[[], ComputationTask], *, count: int, device: str = "cpu", seed: int = 0
    ) -> None:
        self.count = check_int("learners", count, 1)
        self.device = learner_device(device, self.count)
        self._make_learner = make_learner
        self._seed = seed
        self._processes: Optional[LearnerProcesses] = None

    @property
    def running(self) -> bool:
        """Whether the learner processes are started."""
        return self._processes is not None

    def start(self, state: TrainingState, generator: List[Any]) -> None:
        """Start the processes in ``state``, their CPU generators in ``generator`` (GPU learners draw from
        their own, seeded alike)."""
        if self._processes is not None:
            raise RuntimeError("the learner processes are started already")
        processes = LearnerProcesses(self._make_learner, count=self.count, seed=self._seed, device=self.device)
        try:
            processes.set_training_state(state)
            processes.set_generator(generator)
        except BaseException:
            processes.close()
            raise
        self._processes = processes

    def update(self, batch: Transition[np.ndarray]) -> Tuple[Costs, TrainingState]:
        """Learn ``batch``; its costs and learner 0's state after it."""
        return self._started().update(batch)

    def training_state(self) -> TrainingState:
        """Learner 0's state, the optimizer's included."""
        return self._started().training_state()

    def set_training_state(self, state: TrainingState) -> None:
        """Put every learner in ``state``."""
        self._started().set_training_state(state)

    def close(self) -> None:
        """Stop the processes (idempotent); a later update starts new ones."""
        processes, self._processes = self._processes, None
        if processes is not None:
            processes.close()

    def _started(self) -> LearnerProcesses:
        if self._processes is None:
            raise RuntimeError("the learner processes are not started (they start at the task's first update)")
        return self._processes


class _BuildFromSettings:
    """A picklable learner builder: the task's settings, cloudpickled (they may hold closures)."""

    def __init__(self, settings: Any, name: str) -> None:
        self._blob = cloudpickle.dumps((settings, name))

    def __call__(self) -> ComputationTask:
        settings, name = cloudpickle.loads(self._blob)
        return settings.make_task(name)


def learner_builder(settings: Any, name: str) -> Callable[[], ComputationTask]:
    """A picklable builder of one learner of task ``name`` from its learner ``settings``
    (:meth:`TaskSettings.learner_settings <parl.TaskSettings.learner_settings>`)."""
    return _BuildFromSettings(settings, name)
