"""Watching a robot from a test: events and counts shared with worker processes, queue watches, and
polls with a deadline.

:class:`Arrivals` and :class:`FileEvent` work across processes (they pickle as file paths), so agents
in forked workers or Ray actors on this machine can report to the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, List, Optional, Set

from parl.serving.request_queue import Request, RequestQueue
from parl.testing.echo import WAIT


def parl_threads() -> List[threading.Thread]:
    """The threads of this process whose names start with ``parl-`` (wrappers, agents, schedulers)."""
    return [t for t in threading.enumerate() if t.name.startswith("parl-")]


class Sender(threading.Thread):
    """Calls ``fn`` in a thread and records the result or exception; ``done`` is set when it returns."""

    def __init__(self, fn: Callable[[], object], name: str) -> None:
        super().__init__(name=f"sender-{name}", daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        finally:
            self.done.set()


class Arrivals:
    """A count shared by every process of a robot on this machine: agents call :meth:`arrive` (in a
    forked worker process or a Ray worker too: the object pickles as a file path), the test waits
    for a number of arrivals. Each arrival appends one byte to a file of its own."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="parl-arrivals-")
        os.close(fd)
        self._seen = 0
        self._owner = os.getpid()  # copies in other processes leave the file alone

    def arrive(self) -> None:
        """Count one arrival."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)

    def wait(self, count: int, timeout: float = WAIT) -> bool:
        """Whether ``count`` more arrivals came within ``timeout`` seconds (each is counted once)."""
        deadline = time.monotonic() + timeout
        while os.path.getsize(self.path) < self._seen + count:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        self._seen += count
        return True

    def __del__(self) -> None:
        if os.getpid() == self._owner:
            try:
                os.unlink(self.path)
            except OSError:  # removed already
                pass


class FileEvent:
    """A ``threading.Event`` for every process of a robot on this machine (forked or Ray workers
    too: it pickles as a file path): :meth:`set` creates the file, :meth:`wait` looks for it."""

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="parl-event-"), "set")
        self._owner = os.getpid()

    def set(self) -> None:
        """Set the event (for every process)."""
        with open(self.path, "w"):
            pass

    def is_set(self) -> bool:
        """Whether the event is set (by any process)."""
        return os.path.exists(self.path)

    def wait(self, timeout: float) -> bool:
        """Whether the event was set within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def __del__(self) -> None:
        if os.getpid() == self._owner:
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


def announcing(arrivals: Arrivals, change: Optional[Callable[[dict, int], dict]] = None) -> Callable[[dict, int], dict]:
    """An EchoAgent ``corrupt`` hook that counts each prediction on ``arrivals`` as it is sent, and
    alters its inputs with ``change(inputs, episode)`` when given."""

    def hook(inputs: dict, episode: int) -> dict:
        arrivals.arrive()
        return change(inputs, episode) if change is not None else inputs

    return hook


class QueueWatch:
    """Records every request put on and taken from one RequestQueue (from the wrapper's loop or any
    transport's), by shadowing the queue's methods with instance attributes."""

    def __init__(self, queue: RequestQueue) -> None:
        self.puts: List[Request] = []
        self.takes: List[Request] = []
        self._cond = threading.Condition()
        put, take = queue.put, queue.take

        def recording_put(request) -> None:
            put(request)
            with self._cond:
                self.puts.append(request)
                self._cond.notify_all()

        def recording_take(*args, **kwargs) -> list:
            batch = take(*args, **kwargs)
            with self._cond:
                self.takes.extend(batch)
                self._cond.notify_all()
            return batch

        vars(queue).update(put=recording_put, take=recording_take)  # shadow the methods for this queue

    def wait(self, condition: Callable[["QueueWatch"], bool], timeout: float = WAIT) -> bool:
        """Whether ``condition(self)`` came true within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: condition(self), timeout)

    def senders_put(self) -> Set[int]:
        """Agent ids of the requests put so far."""
        return {request.agent_id for request in self.puts}


def wait_for(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """Whether ``condition()`` came true within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def stays(read: Callable[[], object], seconds: float) -> bool:
    """Whether ``read()`` gives the same value for ``seconds`` (polled; False at the first change)."""
    first = read()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if read() != first:
            return False
        time.sleep(0.01)
    return read() == first


def settles(read: Callable[[], object], quiet: float, timeout: float = WAIT) -> bool:
    """Whether ``read()`` stops changing, staying the same for ``quiet`` seconds, within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stays(read, quiet):
            return True
    return False


def child_pids() -> Set[int]:
    """Pids of this process's running children (a zombie, dead but not yet reaped, is not running);
    read from ``/proc``, so always empty where there is none (macOS)."""
    if not os.path.isdir("/proc"):
        return set()
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (read from ``/proc``: False where there is none)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _stat_fields(pid: int) -> Optional[List[str]]:
    """The fields of ``/proc/<pid>/stat`` after the command's name (state, parent pid, ...), or None when
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
