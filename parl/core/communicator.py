"""Communicator: the one seam between an agent's helpers and a computation task, wherever they run.

    comm = runner.communicator(wrapper, agent_id)             # a placement hands it out
    actions, next_states = comm.predict({"obs": obs}, {})     # one sample in, one sample out
    costs = comm.learn(batch)                                 # blocks until trained

A helper only ever calls these methods and reads the specs, so an agent runs
unchanged in threads (:mod:`parl.serving.communicator`), as a greenlet
(:mod:`parl.runtime.cooperative`), in a worker process
(:mod:`parl.runtime.processes`), or behind any transport a new placement
brings: such a transport implements this interface.

Contract every implementation keeps (``tests/test_placement_contract.py``):

- ``predict`` checks the sample against the specs in the calling agent and
  raises ValueError there, failing only that agent;
- an exception in the task's batch reaches each agent of the batch as a
  :class:`~parl.RemoteError`;
- once the robot stops, a waiting call raises :class:`~parl.core.errors.StoppedError`.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.specs import Spec

ArrayDict = Dict[str, np.ndarray]


class Communicator:
    """An agent's end of one computation task (abstract).

    Attributes:
        agent_id: the agent's id in its Manager.
        input_specs, state_specs, action_specs, reward_specs: the task's specs.
    """

    agent_id: int
    input_specs: List[Spec]
    state_specs: List[Spec]
    action_specs: List[Spec]
    reward_specs: List[Spec]

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample (no batch axis).

        Raises:
            ValueError: the sample breaks the specs.
            RemoteError: the task raised on this sample's batch.
            StoppedError: the robot stopped meanwhile.
        """
        raise NotImplementedError

    def learn(self, batch: Transition[np.ndarray]) -> Dict[str, object]:
        """Send a training batch (already checked by the helper); returns the costs of its update
        (floats, and this batch's rows of a per-row ``td_error``).

        Raises:
            RemoteError: the update failed.
            StoppedError: the robot stopped meanwhile.
        """
        raise NotImplementedError
