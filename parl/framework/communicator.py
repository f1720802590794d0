"""Communicator: an agent's end of one ComputationWrapper.

    comm = wrapper.communicator(agent_id)
    actions, next_states = comm.predict({"obs": obs}, {})   # one sample in, one sample out
    costs = comm.learn(batch)                                # blocks until trained

Data is checked against the model's specs here, in the sending agent's
thread, so a bad request fails only the agent that sent it. This class is the
seam for other transports: one that reaches a wrapper in another process or
machine implements the same three methods.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

import numpy as np

from parl.framework.request_queue import Request
from parl.framework.specs import Spec, check_dict

if TYPE_CHECKING:
    from parl.framework.computation_wrapper import ComputationWrapper

ArrayDict = Dict[str, np.ndarray]


class Communicator:
    """In-process transport between one agent and one wrapper."""

    #: Whether each communicator times its own requests for the latency metric; a transport that
    #: times them elsewhere (per batch, say) sets False and registers no timer of its own.
    _times_own_requests = True

    def __init__(self, agent_id: int, wrapper: "ComputationWrapper") -> None:
        self.agent_id = agent_id
        self._wrapper = wrapper
        task = wrapper.task
        self.input_specs: List[Spec] = task.input_specs
        self.state_specs: List[Spec] = task.state_specs
        self.action_specs: List[Spec] = task.action_specs
        self.reward_specs: List[Spec] = task.reward_specs
        self._what = f"task {task.name!r}"
        self._timer = wrapper.stats.prediction_timer() if self._times_own_requests else None

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample; raises ValueError on data that breaks the specs."""
        inputs = check_dict(self.input_specs, inputs, f"{self._what} input")
        states = check_dict(self.state_specs, states if states is not None else {}, f"{self._what} state")
        request = Request(self.agent_id, (inputs, states))
        start = perf_counter()
        self._wrapper.prediction_queue.put(request)
        result = request.wait(self._wrapper.is_stopped)
        requests, seconds = self._timer.total  # latency the agent sees, for metrics
        self._timer.total = (requests + 1, seconds + perf_counter() - start)
        return result

    def learn(self, batch: Mapping[str, object]) -> Dict[str, object]:
        """Send a training batch (already checked by the helper); returns the costs of the update
        (floats, and this batch's rows of a per-row ``td_error``)."""
        request = Request(self.agent_id, batch)
        self._wrapper.training_queue.put(request)
        return request.wait(self._wrapper.is_stopped)
