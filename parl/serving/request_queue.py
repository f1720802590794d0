"""Requests between agent threads and a wrapper thread, with a cheap hand-off.

An agent thread puts a :class:`Request` and blocks on the request's own lock;
the wrapper thread takes a batch of requests, computes, and releases each
lock. A released lock wakes exactly one thread, which is the cheapest hand-off
CPython offers.

Stopping reaches every waiting agent at once, without the agents polling: the
queue fails its pending requests when it is closed, and a loop keeps the
requests it has taken in an :class:`InService` that fails them when the robot
stops (a prediction or update stuck in the algorithm then holds its thread, not
its agents). A waiting agent still checks ``is_stopped`` every
:data:`STOP_CHECK_INTERVAL` seconds, as a safety net only: a thousand agents
waking every 50 ms to look would keep the core that runs them busy taking
Python's lock for nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Union

from parl.core.errors import StoppedError

#: How often a wrapper loop with nothing to do re-checks whether the robot is stopping, in seconds.
POLL_INTERVAL = 0.05
#: How often an agent blocked on a request re-checks whether the robot is stopping, in seconds
#: (stopping fails its request at once; this only bounds the wait if something else holds it).
STOP_CHECK_INTERVAL = 1.0


class Request:
    """One agent's request and, once finished, its result or error."""

    __slots__ = ("agent_id", "payload", "result", "error", "_done")

    def __init__(self, agent_id: int, payload: Any) -> None:
        self.agent_id = agent_id
        #: What the two ends of a queue agree on: a prediction's ``(inputs, states)`` and reply
        #: ``(actions, next_states)``, a training batch and its costs.
        self.payload = payload
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self._done = threading.Lock()
        self._done.acquire()

    def finish(self, result: Any = None, error: Optional[BaseException] = None) -> None:
        """Hand the result (or the error) back and wake the waiting agent."""
        self.result = result
        self.error = error
        self._done.release()

    def ready(self) -> bool:
        """Whether the request is finished (never blocks)."""
        if self._done.acquire(blocking=False):
            self._done.release()
            return True
        return False

    def wait(self, is_stopped: Callable[[], bool]) -> Any:
        """Block until finished; raises the error, or StoppedError if the robot stops first."""
        while not self._done.acquire(timeout=STOP_CHECK_INTERVAL):
            if is_stopped():
                raise StoppedError("the robot was stopped while this agent waited for a reply")
        if self.error is not None:
            raise self.error
        return self.result


class RequestQueue:
    """Pending requests of one kind (prediction or training) for one wrapper."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._items: List[Request] = []
        self._closed = False
        self._flushing = False
        self._held = False
        #: Requests queued so far (every one, taken or not): :meth:`ComputationWrapper.drain` waits
        #: until that many have been answered.
        self.puts = 0

    def put(self, request: Request) -> None:
        """Queue a request; raises StoppedError once the queue is closed."""
        with self._cond:
            if self._closed:
                raise StoppedError("the robot is stopped")
            self._items.append(request)
            self.puts += 1
            self._cond.notify()

    def take(self, min_count: Union[int, Callable[[], int]], max_count: int, timeout: Optional[float]) -> List[Request]:
        """Up to ``max_count`` requests, waiting for ``min_count``: a number, or a function giving it,
        called again each time the wait looks (at every request, and every POLL_INTERVAL seconds).

        With a ``timeout``, returns what is there (at least one) once that many
        seconds have passed since the first request was seen; after :meth:`flush`,
        returns what is there at once. Returns an empty list when the queue is closed or held.
        """
        wanted = min_count if callable(min_count) else lambda: min_count
        with self._cond:
            deadline = None
            while not self._closed:
                if self._held:
                    return []
                n = len(self._items)
                if n >= wanted() or (n and self._flushing):
                    break
                if n and timeout is not None:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + timeout
                    if now >= deadline:
                        break
                    self._cond.wait(min(deadline - now, POLL_INTERVAL))
                else:
                    self._cond.wait(POLL_INTERVAL)
            if self._closed:
                return []
            batch = self._items[:max_count]
            del self._items[:max_count]
            return batch

    def flush(self) -> None:
        """From now on, :meth:`take` waits for no more requests than are there (at least one)."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()

    def hold(self) -> None:
        """From now on, :meth:`take` hands out nothing (requests wait here until :meth:`close`)."""
        with self._cond:
            self._held = True
            self._cond.notify_all()

    def close(self) -> None:
        """Refuse new requests and fail the pending ones with StoppedError."""
        with self._cond:
            self._closed = True
            pending, self._items = self._items, []
            self._cond.notify_all()
        for request in pending:
            request.finish(error=StoppedError("the robot was stopped before this request ran"))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed


class InService:
    """The requests a wrapper loop has taken from its queue and not yet answered.

    The loop :meth:`hold` s what it takes and :meth:`take_back` s each part before answering it;
    :meth:`cancel` (on stop) fails whatever is held with StoppedError. Whoever gets a request
    out of here answers it, so every request is answered exactly once. One lock acquisition per
    call, never per request.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: List[Request] = []
        self._cancelled = False

    def hold(self, requests: Sequence[Request]) -> bool:
        """Keep ``requests`` (in the order they will be answered); False when already cancelled:
        they are then failed here, and the caller must not answer them."""
        with self._lock:
            if not self._cancelled:
                self._held = list(requests)
                return True
        _fail_stopped(requests, "the robot was stopped before this request ran")
        return False

    def take_back(self, count: int) -> Optional[List[Request]]:
        """The next ``count`` held requests, now the caller's to answer; None if :meth:`cancel`
        failed them."""
        with self._lock:
            if self._cancelled:
                return None
            taken, self._held = self._held[:count], self._held[count:]
            return taken

    def cancel(self) -> None:
        """Fail every held request with StoppedError, and every later :meth:`hold`."""
        with self._lock:
            self._cancelled = True
            held, self._held = self._held, []
        _fail_stopped(held, "the robot was stopped while this request ran")


def _fail_stopped(requests: Sequence[Request], message: str) -> None:
    for request in requests:
        request.finish(error=StoppedError(message))
