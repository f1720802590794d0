"""InProcessCommunicator: an agent's end of one ComputationWrapper in the same process.

    comm = wrapper.communicator(agent_id)
    actions, next_states = comm.predict({"obs": obs}, {})   # one sample in, one sample out
    costs = comm.learn(batch)                                # blocks until trained

Data is checked against the model's specs here, in the sending agent's
thread, so a bad request fails only the agent that sent it. Other transports
implement the same interface, :class:`parl.core.communicator.Communicator`.
"""

from __future__ import annotations

from collections import deque
from time import perf_counter
from typing import Deque, Dict, List, Mapping, Optional, Protocol, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.serving.computation_task import ComputationTask
from parl.serving.request import Request, Waiter
from parl.serving.request_queue import RequestQueue
from parl.serving.stats import WrapperStats

ArrayDict = Dict[str, np.ndarray]


class Served(Protocol):
    """What a communicator needs of its wrapper (a :class:`~parl.ComputationWrapper`)."""

    task: ComputationTask
    prediction_queue: RequestQueue
    training_queue: RequestQueue
    stats: WrapperStats
    weights_version: int

    def is_stopped(self) -> bool: ...


class InProcessCommunicator(Communicator):
    """In-process transport between one agent and one wrapper."""

    #: Whether each communicator times its own requests for the latency metric; a transport that
    #: times them elsewhere (per batch, say) sets False and registers no timer of its own.
    _times_own_requests = True

    def __init__(self, agent_id: int, wrapper: Served) -> None:
        self.agent_id = agent_id
        self._wrapper = wrapper
        task = wrapper.task
        self._take_task(task)
        if self._times_own_requests:  # else no timer: such a transport's predict reads none
            self._timer = wrapper.stats.prediction_timer()
        self._in_flight: Deque[Waiter] = deque()  # the replies of training requests handed over, oldest first
        # perf_counter() when the agent's last call began to wait on the robot, and when it got its
        # reply: read by the runner's watchdog (parl.runtime.watchdog) to tell an agent in its environment.
        self._parked_at = 0.0
        self._resumed_at = 0.0

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample; raises ValueError on data that breaks the specs."""
        inputs, states = self.checked(inputs, states)
        waiter = Waiter()
        self._parked_at = start = perf_counter()
        try:
            self._wrapper.prediction_queue.put(Request(self.agent_id, (inputs, states), waiter))
            result = waiter.wait(self._wrapper.is_stopped)
        finally:
            self._resumed_at = end = perf_counter()
        self._timer.book(1, end - start)  # the latency the agent saw, for metrics
        return result

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Send a training batch (already checked by the helper); returns the costs of the update
        (floats, and this batch's rows of a per-row ``td_error``)."""
        waiter = Waiter()
        self._parked_at = perf_counter()
        try:
            self._wrapper.training_queue.put(Request(self.agent_id, batch, waiter))
            return waiter.wait(self._wrapper.is_stopped)
        finally:
            self._resumed_at = perf_counter()

    def put_batch(self, batch: Transition[np.ndarray]) -> None:
        """Queue a training batch for the wrapper's training thread and return at once."""
        waiter = Waiter()
        self._wrapper.training_queue.put(Request(self.agent_id, batch, waiter))
        self._in_flight.append(waiter)

    def take_costs(self, wait: bool = False) -> List[Costs]:
        """The costs of the finished updates of handed-over batches, oldest first; with ``wait``, the
        oldest in flight is waited for first."""
        in_flight = self._in_flight
        done: List[Costs] = []
        if wait and in_flight:
            self._parked_at = perf_counter()
        try:
            while in_flight and (wait and not done or in_flight[0].ready()):
                if done and in_flight[0].failed():
                    break  # raised by the next call, once these costs are taken
                done.append(in_flight.popleft().wait(self._wrapper.is_stopped))  # raises the update's error
        finally:
            if wait:
                self._resumed_at = perf_counter()
        return done

    def batches_in_flight(self) -> int:
        return len(self._in_flight)

    def weights_version(self) -> Optional[int]:
        """The wrapper's :attr:`~parl.ComputationWrapper.weights_version`: the version its task's
        predictions use now."""
        return self._wrapper.weights_version
