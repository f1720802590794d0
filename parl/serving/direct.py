"""DirectCommunicator: a task called in the caller's own thread, one sample at a time, no batching.

    helper.bind(DirectCommunicator(evaluator_task, deterministic=True))

For agents that act outside a Manager, such as evaluation agents playing
against a separate evaluator task: the same Communicator interface as every
placement's transport, with the same checks, answered at once by
``task.predict``. It does not learn.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.serving.computation_task import ComputationTask

ArrayDict = Dict[str, np.ndarray]


class DirectCommunicator(Communicator):
    """Predicts with ``task`` in the calling thread (``deterministic``: greedy or mean actions)."""

    def __init__(self, task: ComputationTask, *, deterministic: bool = False, agent_id: int = 0) -> None:
        self.agent_id = agent_id
        self.task = task
        self.deterministic = deterministic
        self._take_task(task)

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample; raises ValueError on data that breaks the specs."""
        inputs, states = self.checked(inputs, states)
        actions, next_states = self.task.predict(
            {k: v[None] for k, v in inputs.items()},
            {k: v[None] for k, v in states.items()},
            deterministic=self.deterministic,
        )
        return {k: v[0] for k, v in actions.items()}, {k: v[0] for k, v in next_states.items()}

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Refused: a direct communicator serves acting only.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError(f"{self._what}: a DirectCommunicator does not learn")
