"""Communicator: the one seam between an agent's helpers and a computation task, wherever they run.

    comm = runner.communicator(wrapper, agent_id)             # a placement hands it out
    actions, next_states = comm.predict({"obs": obs}, {})     # one sample in, one sample out
    costs = comm.learn(batch)                                 # blocks until trained
    comm.put_batch(batch)                                     # or: hand it over and go on acting,
    for costs in comm.take_costs(wait=False): ...             # and collect the costs later

A helper only ever calls these methods and reads the specs, so an agent runs
unchanged in threads (:mod:`parl.serving.communicator`), as a greenlet
(:mod:`parl.runtime.cooperative`), in a worker process
(:mod:`parl.runtime.processes`), or behind any transport a new placement
brings: such a transport implements this interface.

Contract every implementation keeps (:class:`parl.testing.PlacementContract`):

- ``predict`` checks the sample against the specs in the calling agent (shape,
  dtype, finite floats, integers inside a declared range) and raises ValueError
  there, failing only that agent;
- an exception in the task's batch reaches each agent of the batch as a
  :class:`~parl.RemoteError`;
- once the robot stops, a waiting call raises :class:`~parl.core.errors.StoppedError`;
- the costs of batches handed over with ``put_batch`` come back from ``take_costs`` in the order
  the batches were handed over, each once.

``put_batch`` and ``take_costs`` have a default here that learns each batch at
once, blocking, for transports without a hand-over of their own; parl's
in-process, cooperative and worker-process transports return from
``put_batch`` at once.
"""

from __future__ import annotations

import abc
from collections import deque
from typing import Deque, Dict, List, Mapping, Optional, Protocol, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.costs import Costs
from parl.core.specs import Spec, check_dict
from parl.core.task_specs import TaskSpecs

ArrayDict = Dict[str, np.ndarray]


class SpecsOfTask(Protocol):
    """What a transport reads of a computation task it serves in its own process: the name and specs."""

    name: str
    specs: TaskSpecs


class Communicator(abc.ABC):
    """An agent's end of one computation task (abstract).

    Attributes:
        agent_id: the agent's id in its Manager.
        input_specs, state_specs, action_specs, reward_specs: the task's specs.
    """

    #: Names the task in errors about a sample (``"task 'RL'"``); set by every transport.
    _what: str = "task"
    _what_input: str = "task input"
    _what_state: str = "task state"

    def _name_task(self, name: str) -> None:
        """Name task ``name`` in this transport's errors (``task 'RL' input 'obs': ...``); the labels
        are made once here, not at every :meth:`checked`."""
        self._what = f"task {name!r}"
        self._what_input, self._what_state = f"{self._what} input", f"{self._what} state"

    def _take_task(self, task: SpecsOfTask) -> None:
        """Take ``task``'s specs (the same lists, not copies) and name it in errors, as every
        transport that sits beside the task in one process does."""
        self._take_specs(task.name, task.specs)

    def _take_specs(self, name: str, specs: TaskSpecs) -> None:
        """Take ``specs`` (the same lists, not copies) and name task ``name`` in errors."""
        self.input_specs, self.state_specs = specs.inputs, specs.states
        self.action_specs, self.reward_specs = specs.actions, specs.rewards
        self._name_task(name)

    @property
    def specs(self) -> TaskSpecs:
        """The four spec lists as one value (what crosses to a transport in another process)."""
        return TaskSpecs(self.input_specs, self.state_specs, self.action_specs, self.reward_specs)

    agent_id: int
    input_specs: List[Spec]
    state_specs: List[Spec]
    action_specs: List[Spec]
    reward_specs: List[Spec]

    def checked(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]]
    ) -> Tuple[ArrayDict, ArrayDict]:
        """``inputs`` and ``states`` (None: none) checked against the specs and converted where they
        convert: what a transport's ``predict`` does first, in the calling agent. Float values must
        be finite and integers inside their spec's range (:func:`~parl.core.specs.check_sample`).

        Raises:
            ValueError: naming the task, the spec and the problem (the bad value and its index).
        """
        return (
            check_dict(self.input_specs, inputs, self._what_input),
            check_dict(self.state_specs, states if states is not None else {}, self._what_state),
        )

    @abc.abstractmethod
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

    @abc.abstractmethod
    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Send a training batch (already checked by the helper); returns the costs of its update
        (floats, and this batch's rows of a per-row ``td_error``).

        Raises:
            RemoteError: the update failed.
            StoppedError: the robot stopped meanwhile.
        """
        raise NotImplementedError

    def put_batch(self, batch: Transition[np.ndarray]) -> None:
        """Hand a training batch over and return, where the transport allows, before it is learned;
        :meth:`take_costs` gives its costs later. This default learns it now (blocking).

        Raises:
            RemoteError: the update failed (this default only; others raise it from :meth:`take_costs`).
            StoppedError: the robot is stopped.
        """
        self._handed_over().append(self.learn(batch))

    def take_costs(self, wait: bool = False) -> List[Costs]:
        """The costs of the handed-over batches whose updates have finished, oldest first, each once;
        with ``wait``, first waits until the oldest batch still in flight is learned.

        Raises:
            RemoteError: the update of the oldest finished batch failed (it is taken, the later ones
                stay for the next call).
            StoppedError: the robot stopped while waiting.
        """
        done = list(self._handed_over())
        self._handed_over().clear()
        return done

    def batches_in_flight(self) -> int:
        """Batches handed over whose costs :meth:`take_costs` has not given yet."""
        return len(self._handed_over())

    def weights_version(self) -> Optional[int]:
        """The version of the weights this agent's predictions use now (the updates its task has
        learned, counted from 0; a copy acting for a learner elsewhere: the version it was sent),
        which helpers stamp on what they store (``Transition.behaviour_version``); None where the
        transport does not tell (this default)."""
        return None

    def _handed_over(self) -> Deque[Costs]:
        """The default hand-over's finished costs (made on first use, so subclasses need no __init__)."""
        handed = self.__dict__.get("_handed")
        if handed is None:
            handed = self.__dict__["_handed"] = deque()
        return handed
