"""Shared-memory transport between agents in worker processes and the parent's wrappers.

A prediction crosses the process boundary without pickling. Every (agent, task)
pair owns a fixed :class:`Slot` in one anonymous shared mapping made before the
workers are forked, laid out by the task's specs: a request area (inputs,
states) and a reply area (actions, next states).

    worker, agent thread (ShmCommunicator.predict):
        copy the checked inputs into the slot; write the slot's 4-byte number to the
        worker's request pipe; block reading the agent's reply pipe
    parent, the worker's I/O thread:
        read slot numbers; put one Request per number (views of the slot, no copy, its
        reply a SlotReply) on the task's ``wrapper.prediction_queue``
    parent, the wrapper's prediction loop (SlotReply.deliver):
        copy the batch's row into the slot's reply area; write one byte (REPLY_OK)
        to the agent's reply pipe

The slot is written by one side at a time: the worker writes the request area
only while no request of that slot is in flight, the parent writes the reply
area only while one is. A failed prediction sends REPLY_ERROR and the error's
text; a stopped wrapper sends REPLY_STOPPED. A reply that does not match the
specs (an extra output, another dtype) is sent whole as a :mod:`parl.wire` frame
(REPLY_DATA), so the agent gets what an in-process agent would.

Training batches are sent per many steps, as :mod:`parl.wire` frames on the
worker's message pipe (:func:`send_message`); the costs come back on the
agent's reply pipe (REPLY_COSTS and a frame, or REPLY_LEARN_ERROR and the
error's text) from the wrapper's training loop (:class:`LearnReply`), in the
order the batches were sent. ``learn`` waits for them; ``put_batch`` returns
at once, and the costs are read off the pipe by a later ``take_costs``, or by
a prediction's wait that finds them ahead of its reply. Nothing read from a
pipe is unpickled: a frame that does not decode raises ValueError
(:func:`receive_message`).

The weights version the parent's task predicts with sits in shared memory too
(:meth:`ComputationWrapper.share_version <parl.ComputationWrapper.share_version>`),
so ``weights_version`` reads it without a message.
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import threading
from collections import deque
from time import perf_counter
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import numpy as np
from numpy.typing import DTypeLike

from parl import wire
from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.core.errors import RemoteError, StoppedError
from parl.core.specs import Layout, fits
from parl.core.task_specs import TaskSpecs
from parl.serving.request import Reply, Request
from parl.serving.stats import PredictionTimer

ArrayDict = Dict[str, np.ndarray]

#: First byte of what the parent writes to an agent's reply pipe.
REPLY_OK = b"\x01"
REPLY_ERROR = b"\x02"  # then a frame of the error's text
REPLY_STOPPED = b"\x03"  # the wrapper is stopped, or the worker is stopping
REPLY_COSTS = b"\x04"  # then a frame of the update's costs
REPLY_DATA = b"\x05"  # then a frame of (actions, next_states) that do not fit the slot
REPLY_LEARN_ERROR = b"\x06"  # then a frame of a failed update's error text

_ALIGN = 64
SLOT_NUMBER = struct.Struct("<I")


# -- framing on raw pipes ---------------------------------------------------------


def write_all(fd: int, *parts: bytes) -> None:
    """Write every byte of ``parts``, in order, to ``fd``: one ``writev`` when the pipe takes them
    whole, so a frame of at most PIPE_BUF bytes is never split by another writer's bytes."""
    views = [memoryview(part) for part in parts if len(part)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]


def read_exact(fd: int, n: int) -> Optional[bytearray]:
    """Exactly ``n`` bytes from ``fd``, read straight into one buffer; None at end of file."""
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        count = os.readv(fd, [view[got:]])
        if not count:
            return None
        got += count
    return buffer


def send_message(fd: int, lock: threading.Lock, message: object) -> None:
    """Write ``message`` as one :mod:`parl.wire` frame; ``lock`` keeps frames of several threads whole.

    Raises:
        ValueError: ``message`` holds something that does not cross (nothing is written).
    """
    header, body = wire.pack_parts(message)
    with lock:
        write_all(fd, header, body)


def receive_message(fd: int) -> Any:
    """One :func:`send_message` message; None at end of file (the sender died mid-way or closed).

    Raises:
        ValueError: what was read is not a whole frame of plain data (its one-line reason).
    """
    header = read_exact(fd, wire.HEADER.size)
    if header is None:
        return None
    size = wire.body_size(header)
    body = read_exact(fd, size)
    if body is None:
        raise ValueError(f"the pipe ended inside a frame of {size} bytes")
    return wire.unpack_body(body)


# -- slots ----------------------------------------------------------------------------


class SharedArena:
    """One anonymous shared mapping, carved into aligned numpy views before the fork.

    The mapping is ``MAP_SHARED`` and has no name, so forked workers share it
    and nothing is left in ``/dev/shm`` when a process dies.
    """

    def __init__(self) -> None:
        self._fields: List[Tuple[int, Tuple[int, ...], np.dtype]] = []
        self._size = 0
        self._buffer: Optional[mmap.mmap] = None

    def reserve(self, shape: Sequence[int], dtype: DTypeLike) -> int:
        """Reserve an array; returns its handle for :meth:`array` (after :meth:`allocate`)."""
        if self._buffer is not None:
            raise RuntimeError("the arena is already allocated")
        dt = np.dtype(dtype)
        offset = -(-self._size // _ALIGN) * _ALIGN
        self._size = offset + int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        self._fields.append((offset, tuple(shape), dt))
        return len(self._fields) - 1

    def allocate(self) -> None:
        """Map the shared memory (zero-filled)."""
        self._buffer = mmap.mmap(-1, max(self._size, 1))

    def array(self, handle: int) -> np.ndarray:
        """The view of a reserved array."""
        offset, shape, dtype = self._fields[handle]
        count = int(np.prod(shape, dtype=np.int64))
        if self._buffer is None:
            raise RuntimeError("the arena is not allocated yet")
        return np.frombuffer(self._buffer, dtype=dtype, count=count, offset=offset).reshape(shape)

    @property
    def nbytes(self) -> int:
        """Bytes reserved so far."""
        return self._size


class Slot:
    """The shared request and reply areas of one (agent, task) pair, as dicts of views by spec name."""

    __slots__ = (
        "number",
        "agent_id",
        "task",
        "inputs",
        "states",
        "actions",
        "next_states",
        "payload",
        "timer",
        "reply_layout",
        "requested_at",
        "answered_at",
    )

    def __init__(
        self,
        number: int,
        agent_id: int,
        task: str,
        arena: SharedArena,
        specs: TaskSpecs,
    ) -> None:
        self.number = number
        self.agent_id = agent_id
        self.task = task
        handles = [
            {s.name: arena.reserve(s.shape, s.dtype) for s in listed}
            for listed in (specs.inputs, specs.states, specs.actions, specs.states)
        ]
        # Handles until bind_views, then views (ArrayDict).
        self.inputs: Dict[str, Any] = handles[0]
        self.states: Dict[str, Any] = handles[1]
        self.actions: Dict[str, Any] = handles[2]
        self.next_states: Dict[str, Any] = handles[3]
        self.payload: Tuple[ArrayDict, ArrayDict] = ({}, {})
        #: The actions' and next states' names, shapes and dtypes (for :func:`~parl.core.specs.fits`).
        self.reply_layout: Tuple[Layout, Layout] = ([], [])
        #: Counts the slot's predictions and their time in the parent (put to reply) for the wrapper's
        #: metrics (None: not counted).
        self.timer: Optional[PredictionTimer] = None
        #: perf_counter() in the parent when the slot's last request (prediction or update) arrived,
        #: and when it was answered: the watchdog's view of the agent (parl.runtime.watchdog).
        self.requested_at = 0.0
        self.answered_at = 0.0

    def bind_views(self, arena: SharedArena) -> None:
        """Turn the reserved handles into views, once the arena is allocated."""
        self.inputs = {k: arena.array(h) for k, h in self.inputs.items()}
        self.states = {k: arena.array(h) for k, h in self.states.items()}
        self.actions = {k: arena.array(h) for k, h in self.actions.items()}
        self.next_states = {k: arena.array(h) for k, h in self.next_states.items()}
        self.payload = (self.inputs, self.states)  # what the wrapper stacks: read-only views
        self.reply_layout = (_layout(self.actions), _layout(self.next_states))


def _layout(views: ArrayDict) -> Layout:
    return [(name, view.shape, view.dtype) for name, view in views.items()]


# -- parent side: requests that answer through the slot -----------------------------------


def error_text(error: BaseException) -> str:
    """What crosses to the worker for a failed request: a RemoteError's message (with the
    original traceback), or the exception's type and message."""
    if isinstance(error, RemoteError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def error_reply(error: BaseException) -> bytes:
    """What an agent's reply pipe gets for a failed request: REPLY_STOPPED, or REPLY_ERROR and a frame
    of :func:`error_text`."""
    if isinstance(error, StoppedError):
        return REPLY_STOPPED
    text = error_text(error).encode("utf-8", "replace").decode("utf-8")  # lone surrogates replaced
    return REPLY_ERROR + wire.pack(text)


class SlotReply(Reply):
    """The reply of a prediction request from the agent of ``slot``: written into the slot's reply
    area and signalled on the agent's pipe ``reply_fd``.

    ``deliver`` runs in the wrapper's prediction loop (or in ``RequestQueue.close``); it never
    raises, so a worker that died cannot break the loop.
    """

    __slots__ = ("slot", "reply_fd")

    def __init__(self, slot: Slot, reply_fd: int) -> None:
        self.slot = slot
        self.reply_fd = reply_fd

    def deliver(self, request: Request) -> None:
        slot = self.slot
        slot.answered_at = perf_counter()  # before the reply: the agent's next request comes after it
        error = request.error
        try:
            if error is None:
                actions, next_states = request.result
                action_layout, state_layout = slot.reply_layout
                if fits(action_layout, actions) and fits(state_layout, next_states):
                    for name, view in slot.actions.items():
                        view[...] = actions[name]
                    for name, view in slot.next_states.items():
                        view[...] = next_states[name]
                    os.write(self.reply_fd, REPLY_OK)
                    self._count()
                    return
                # Not what the specs declare (an extra output, another dtype): sent whole, as the
                # in-process Communicator would hand it over.
                try:
                    data = REPLY_DATA + wire.pack((actions, next_states))
                except ValueError as exc:  # the agent gets the error instead of a reply
                    error = RemoteError(f"the reply of task {slot.task!r} to agent {slot.agent_id}", exc)
                else:
                    write_all(self.reply_fd, data)
                    self._count()
                    return
            write_all(self.reply_fd, error_reply(error))
        except OSError:
            pass  # the worker is gone (EPIPE): nobody waits for this reply

    def _count(self) -> None:
        """Book the prediction's time in the parent, from its arrival to its reply."""
        slot = self.slot
        if slot.timer is not None:  # written by the prediction loop only
            slot.timer.book(1, perf_counter() - slot.requested_at)


class LearnReply(Reply):
    """The reply of a training request from the agent of ``slot``: its costs go back onto the agent's
    reply pipe ``reply_fd`` as a :mod:`parl.wire` frame (answered at the slot's ``answered_at``)."""

    __slots__ = ("reply_fd", "slot")

    def __init__(self, slot: Slot, reply_fd: int) -> None:
        self.reply_fd = reply_fd
        self.slot = slot

    def deliver(self, request: Request) -> None:
        self.slot.answered_at = perf_counter()
        error, data = request.error, None
        if error is None:
            try:
                data = REPLY_COSTS + wire.pack(request.result)
            except ValueError as exc:  # the agent gets the error instead of the costs
                error = RemoteError(f"sending the costs to agent {request.agent_id}", exc)
        if data is None:
            assert error is not None  # given, or made when the costs could not be packed
            data = error_reply(error)
            if data[:1] == REPLY_ERROR:  # told apart from a prediction's error, which it may come before
                data = REPLY_LEARN_ERROR + data[1:]
        try:
            write_all(self.reply_fd, data)
        except OSError:
            pass  # the worker is gone


# -- worker side -------------------------------------------------------------------------


class TransportedError(RemoteError):
    """A wrapper-side failure re-raised in a worker: the parent's message, original traceback included."""

    def __init__(self, text: str) -> None:
        RuntimeError.__init__(self, text)
        self.original = None
        self.remote_traceback = text


class ShmCommunicator(Communicator):
    """The :class:`~parl.core.communicator.Communicator` of an agent in a worker process, answered by
    the parent's wrapper."""

    def __init__(
        self,
        *,
        agent_id: int,
        specs: TaskSpecs,
        slot: Slot,
        request_fd: int,
        reply_fd: int,
        send: Callable[[object], None],
        stopped: threading.Event,
        publish_counters: Callable[[], None],
        version: Optional[np.ndarray] = None,
    ) -> None:
        """``version``: the int64 cell in shared memory that holds the task's weights version (None:
        :meth:`weights_version` tells none)."""
        self.agent_id = agent_id
        self._take_specs(slot.task, specs)
        self._slot = slot
        self._number = SLOT_NUMBER.pack(slot.number)
        self._request_fd = request_fd
        self._reply_fd = reply_fd
        self._send = send
        self._stopped = stopped
        self._publish_counters = publish_counters
        self._version = version
        self._owed = 0  # batches handed over whose reply has not been read off the pipe
        self._finished: Deque[Tuple[Optional[Costs], Optional[BaseException]]] = deque()  # read, not taken

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample; raises ValueError on data that breaks the specs."""
        inputs, states = self.checked(inputs, states)
        if self._stopped.is_set():
            raise StoppedError("the worker is stopping")
        slot = self._slot
        for name, view in slot.inputs.items():
            view[...] = inputs[name]
        for name, view in slot.states.items():
            view[...] = states[name]
        self._publish_counters()
        os.write(self._request_fd, self._number)
        whole = self._wait(b"")
        if whole is not None:
            return whole
        return (
            {name: view.copy() for name, view in slot.actions.items()},
            {name: view.copy() for name, view in slot.next_states.items()},
        )

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Send a training batch (a :mod:`parl.wire` frame: a Transition crosses as the tuple of its
        fields); returns the costs of the update.

        Raises:
            ValueError: the batch holds something that does not cross (an object array, say).
        """
        self._hand_over(batch)
        while self._owed:  # the replies of batches handed over earlier come first
            self._read_reply(self._wait(REPLY_COSTS))
        costs, error = self._finished.pop()
        if error is not None:
            raise error
        assert costs is not None  # a reply is costs or an error
        return costs

    def put_batch(self, batch: Transition[np.ndarray]) -> None:
        """Send a training batch (as :meth:`learn` does) and return at once; :meth:`take_costs` gives
        its costs once its update's reply has come.

        Raises:
            ValueError: the batch holds something that does not cross.
            StoppedError: the worker is stopping.
        """
        self._hand_over(batch)

    def take_costs(self, wait: bool = False) -> List[Costs]:
        """The costs of the handed-over batches whose replies have come, oldest first; with ``wait``,
        first waits for the oldest still in flight.

        Raises:
            RemoteError: the oldest finished update failed (taken; the later ones stay).
            StoppedError: the robot stopped while waiting.
        """
        if wait and not self._finished and self._owed:
            self._read_reply(self._wait(REPLY_COSTS))
        while self._owed and _readable(self._reply_fd):
            self._read_reply(self._wait(REPLY_COSTS))
        done: List[Costs] = []
        while self._finished:
            costs, error = self._finished[0]
            if error is not None:
                if done:
                    break  # raised by the next call, once these costs are taken
                self._finished.popleft()
                raise error
            self._finished.popleft()
            assert costs is not None
            done.append(costs)
        return done

    def batches_in_flight(self) -> int:
        return self._owed + len(self._finished)

    def weights_version(self) -> Optional[int]:
        """The parent task's weights version now, read from shared memory (None: not shared)."""
        return None if self._version is None else int(self._version[0])

    def _hand_over(self, batch: Transition[np.ndarray]) -> None:
        if self._stopped.is_set():
            raise StoppedError("the worker is stopping")
        self._publish_counters()
        self._send(["learn", self._slot.number, batch])
        self._owed += 1

    def _read_reply(self, reply: Tuple[Optional[Costs], Optional[BaseException]]) -> None:
        """Keep one update's reply (costs or error), read off the pipe, for :meth:`take_costs`."""
        self._owed -= 1
        self._finished.append(reply)

    def _wait(self, expected: bytes) -> Any:
        """Block for this agent's reply: None for REPLY_OK (the reply is in the slot), else the frame's
        value; for REPLY_COSTS, the (costs, error) of the oldest batch in flight. The reply of a batch
        handed over that comes first is kept for :meth:`take_costs`. Raises ValueError for a frame
        that does not decode (the agent fails with it)."""
        while True:
            code = os.read(self._reply_fd, 1)
            if code == REPLY_OK and not expected:
                return None
            if code == REPLY_DATA and not expected:
                return self._receive(tuple, "a reply")
            if code in (REPLY_COSTS, REPLY_LEARN_ERROR) and self._owed:
                reply: Tuple[Optional[Costs], Optional[BaseException]] = (
                    (self._receive(dict, "the costs of an update"), None)
                    if code == REPLY_COSTS
                    else (None, TransportedError(self._receive(str, "an error")))
                )
                if expected == REPLY_COSTS:
                    return reply
                self._read_reply(reply)
                continue
            if code == REPLY_ERROR:
                raise TransportedError(self._receive(str, "an error"))
            if code == REPLY_STOPPED or not code:
                raise StoppedError("the robot was stopped while this agent waited for a reply")
            # An unexpected code (left from a request given up on): wait on, unless stopping.
            if self._stopped.is_set():
                raise StoppedError("the worker is stopping")

    def _receive(self, kind: Type[Any], what: str) -> Any:
        value = receive_message(self._reply_fd)
        if not isinstance(value, kind) or (kind is tuple and len(value) != 2):
            raise ValueError(f"{what} on the reply pipe of agent {self.agent_id} is a {type(value).__name__}")
        return value


def _readable(fd: int) -> bool:
    """Whether ``fd`` has bytes to read now (without waiting)."""
    return bool(select.select([fd], [], [], 0)[0])
