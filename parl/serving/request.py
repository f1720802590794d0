"""Request: one agent's request to a wrapper, holding how its reply is delivered.

    waiter = Waiter()
    wrapper.prediction_queue.put(Request(agent_id, (inputs, states), waiter))
    actions, next_states = waiter.wait(is_stopped)    # the agent thread blocks here
    ...
    request.finish((actions, next_states))            # the wrapper's loop: delivered as its Reply says

Every request is this one class. How its result or error gets back to the agent is the
:class:`Reply` it holds: :class:`Waiter` wakes an agent thread blocked on it, :class:`Callback`
hands the result to a function, and a placement brings its own (a worker process's slot and
pipe, a parked greenlet). ``finish`` is called exactly once per request, by whoever answers it
(the wrapper's loops, or a queue failing its pending requests when the robot stops).
"""

from __future__ import annotations

import abc
import threading
from typing import Any, Callable, Generic, Optional, TypeVar

from parl.core.errors import StoppedError

#: How often an agent blocked on a request re-checks whether the robot is stopping, in seconds
#: (stopping fails its request at once; this only bounds the wait if something else holds it).
STOP_CHECK_INTERVAL = 1.0


class Reply(abc.ABC):
    """How a finished :class:`Request`'s result (or error) reaches its agent."""

    __slots__ = ()

    @abc.abstractmethod
    def deliver(self, request: "Request") -> None:
        """Hand ``request.result`` (or ``request.error``, when not None) to the agent. Called once per
        request, in the thread that answers it; must not raise."""
        raise NotImplementedError


#: The type of a request's reply (``Request[Waiter]``: one an agent thread waits on).
R = TypeVar("R", bound=Reply)


class Request(Generic[R]):
    """One agent's request: what it sends, and once finished, its result or error.

    Attributes:
        agent_id: the sending agent's id.
        payload: a prediction's ``(inputs, states)`` or a training batch: what the two ends of a
            queue agree on, so typed ``Any`` here.
        reply: how the result is delivered.
        result: the result, once finished without an error: a prediction's ``(actions,
            next_states)``, an update's costs.
        error: the error, once finished with one (else None).
    """

    __slots__ = ("agent_id", "payload", "reply", "result", "error")

    def __init__(self, agent_id: int, payload: Any, reply: R) -> None:
        self.agent_id = agent_id
        self.payload = payload
        self.reply = reply
        self.result: Any = None
        self.error: Optional[BaseException] = None

    def finish(self, result: Any = None, error: Optional[BaseException] = None) -> None:
        """Keep the result (or the error) and deliver it as :attr:`reply` says."""
        self.result = result
        self.error = error
        self.reply.deliver(self)


class Waiter(Reply):
    """The reply of an agent thread that blocks until its request is finished (on a lock of its own:
    a released lock wakes exactly one thread, the cheapest hand-off CPython offers). One per request."""

    __slots__ = ("_done", "_request")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self._request: Optional[Request] = None

    def deliver(self, request: Request) -> None:
        self._request = request
        self._done.release()

    def ready(self) -> bool:
        """Whether the request is finished (never blocks)."""
        if self._done.acquire(blocking=False):
            self._done.release()
            return True
        return False

    def failed(self) -> bool:
        """Whether the request is finished with an error (never blocks)."""
        request = self._request
        return request is not None and request.error is not None

    def wait(self, is_stopped: Callable[[], bool]) -> Any:
        """Block until the request is finished; its result. Called once.

        Raises:
            BaseException: the request's error.
            StoppedError: the robot stopped first (``is_stopped()`` is asked every
                :data:`STOP_CHECK_INTERVAL` seconds).
        """
        while not self._done.acquire(timeout=STOP_CHECK_INTERVAL):
            if is_stopped():
                raise StoppedError("the robot was stopped while this agent waited for a reply")
        request, self._request = self._request, None  # no cycle left between the two
        assert request is not None  # delivered before the lock was released
        if request.error is not None:
            raise request.error
        return request.result


class Callback(Reply):
    """The reply of a request answered through a function: ``call(result, error)`` (error None on
    success), in the thread that finishes the request."""

    __slots__ = ("_call",)

    def __init__(self, call: Callable[[object, Optional[BaseException]], None]) -> None:
        self._call = call

    def deliver(self, request: Request) -> None:
        self._call(request.result, request.error)
