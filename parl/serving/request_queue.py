"""Requests between agent threads and a wrapper thread, with a cheap hand-off.

An agent thread puts a :class:`Request` and blocks on the request's own lock;
the wrapper thread takes a batch of requests, computes, and releases each
lock. A released lock wakes exactly one thread, which is the cheapest hand-off
CPython offers.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional

from parl.core.errors import StoppedError

#: How often a blocked agent re-checks whether the robot is stopping, in seconds.
POLL_INTERVAL = 0.05


class Request:
    """One agent's request and, once finished, its result or error."""

    __slots__ = ("agent_id", "payload", "result", "error", "_done")

    def __init__(self, agent_id: int, payload: object) -> None:
        self.agent_id = agent_id
        self.payload = payload
        self.result: object = None
        self.error: Optional[BaseException] = None
        self._done = threading.Lock()
        self._done.acquire()

    def finish(self, result: object = None, error: Optional[BaseException] = None) -> None:
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

    def wait(self, is_stopped: Callable[[], bool]) -> object:
        """Block until finished; raises the error, or StoppedError if the robot stops first."""
        while not self._done.acquire(timeout=POLL_INTERVAL):
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

    def put(self, request: Request) -> None:
        """Queue a request; raises StoppedError once the queue is closed."""
        with self._cond:
            if self._closed:
                raise StoppedError("the robot is stopped")
            self._items.append(request)
            self._cond.notify()

    def take(self, min_count: int, max_count: int, timeout: Optional[float]) -> List[Request]:
        """Up to ``max_count`` requests, waiting for ``min_count``.

        With a ``timeout``, returns what is there (at least one) once that many
        seconds have passed since the first request was seen. Returns an empty
        list when the queue is closed.
        """
        with self._cond:
            deadline = None
            while not self._closed:
                n = len(self._items)
                if n >= min_count:
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
