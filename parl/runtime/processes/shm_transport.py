"""Shared-memory transport between agents in worker processes and the parent's wrappers.

A prediction crosses the process boundary without pickling. Every (agent, task)
pair owns a fixed :class:`Slot` in one anonymous shared mapping made before the
workers are forked, laid out by the task's specs: a request area (inputs,
states) and a reply area (actions, next states).

    worker, agent thread (ShmCommunicator.predict):
        copy the checked inputs into the slot; write the slot's 4-byte number to the
        worker's request pipe; block reading the agent's reply pipe
    parent, the worker's I/O thread:
        read slot numbers; put one SlotRequest per number (views of the slot, no copy)
        on the task's ``wrapper.prediction_queue``
    parent, the wrapper's prediction loop (SlotRequest.finish):
        copy the batch's row into the slot's reply area; write one byte (REPLY_OK)
        to the agent's reply pipe

The slot is written by one side at a time: the worker writes the request area
only while no request of that slot is in flight, the parent writes the reply
area only while one is. A failed prediction sends REPLY_ERROR and the error's
text; a stopped wrapper sends REPLY_STOPPED. A reply that does not match the
specs (an extra output, another dtype) is pickled whole (REPLY_PICKLED), so the
agent gets what an in-process agent would.

Training batches are sent per many steps, so they are pickled onto the
worker's message pipe (framed by :func:`send_message`); the costs come back on
the agent's reply pipe (REPLY_COSTS, framed) from the wrapper's training loop
(:class:`LearnRequest`).
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
import threading
from time import perf_counter
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.errors import RemoteError, StoppedError
from parl.core.specs import Layout, Spec, fits
from parl.serving.request_queue import Request

ArrayDict = Dict[str, np.ndarray]

#: First byte of what the parent writes to an agent's reply pipe.
REPLY_OK = b"\x01"
REPLY_ERROR = b"\x02"  # then a framed UTF-8 error text
REPLY_STOPPED = b"\x03"  # the wrapper is stopped, or the worker is stopping
REPLY_COSTS = b"\x04"  # then a framed pickle of the update's costs
REPLY_PICKLED = b"\x05"  # then a framed pickle of (actions, next_states) that do not fit the slot

_ALIGN = 64
_LENGTH = struct.Struct("<I")
SLOT_NUMBER = struct.Struct("<I")


# -- framing on raw pipes ---------------------------------------------------------


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe write may be partial above PIPE_BUF)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(fd: int, n: int) -> Optional[bytes]:
    """Exactly ``n`` bytes from ``fd``; None at end of file."""
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte length in front."""
    return _LENGTH.pack(len(payload)) + payload


def read_frame(fd: int) -> Optional[bytes]:
    """One :func:`frame` from ``fd``; None at end of file."""
    header = read_exact(fd, _LENGTH.size)
    if header is None:
        return None
    return read_exact(fd, _LENGTH.unpack(header)[0])


def send_message(fd: int, lock: threading.Lock, message: object) -> None:
    """Pickle ``message`` and write it as one frame; ``lock`` keeps frames of several threads whole."""
    data = frame(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
    with lock:
        write_all(fd, data)


def receive_message(fd: int) -> Optional[object]:
    """One :func:`send_message` message; None at end of file (the sender died mid-way or closed)."""
    data = read_frame(fd)
    return None if data is None else pickle.loads(data)


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

    def reserve(self, shape: Sequence[int], dtype: object) -> int:
        """Reserve an array; returns its handle for :meth:`array` (after :meth:`allocate`)."""
        if self._buffer is not None:
            raise RuntimeError("the arena is already allocated")
        dtype = np.dtype(dtype)
        offset = -(-self._size // _ALIGN) * _ALIGN
        self._size = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self._fields.append((offset, tuple(shape), dtype))
        return len(self._fields) - 1

    def allocate(self) -> None:
        """Map the shared memory (zero-filled)."""
        self._buffer = mmap.mmap(-1, max(self._size, 1))

    def array(self, handle: int) -> np.ndarray:
        """The view of a reserved array."""
        offset, shape, dtype = self._fields[handle]
        count = int(np.prod(shape, dtype=np.int64))
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
        input_specs: Sequence[Spec],
        state_specs: Sequence[Spec],
        action_specs: Sequence[Spec],
    ) -> None:
        self.number = number
        self.agent_id = agent_id
        self.task = task
        handles = [
            {s.name: arena.reserve(s.shape, s.dtype) for s in specs}
            for specs in (input_specs, state_specs, action_specs, state_specs)
        ]
        self.inputs: ArrayDict = handles[0]  # handles until bind_views
        self.states: ArrayDict = handles[1]
        self.actions: ArrayDict = handles[2]
        self.next_states: ArrayDict = handles[3]
        self.payload: Tuple[ArrayDict, ArrayDict] = ({}, {})
        #: The actions' and next states' names, shapes and dtypes (for :func:`~parl.core.specs.fits`).
        self.reply_layout: Tuple[Layout, Layout] = ([], [])
        #: Counts the slot's predictions and their time in the parent (put to reply) for the wrapper's
        #: metrics (a ``PredictionTimer``; None: not counted).
        self.timer = None
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


class SlotRequest(Request):
    """A prediction request whose reply is written into its slot and signalled on the agent's pipe.

    ``finish`` runs in the wrapper's prediction loop (or in ``RequestQueue.close``); it
    never raises, so a worker that died cannot break the loop.
    """

    __slots__ = ("slot", "reply_fd", "start")

    def __init__(self, slot: Slot, reply_fd: int) -> None:
        super().__init__(slot.agent_id, slot.payload)
        self.slot = slot
        self.reply_fd = reply_fd
        self.start = perf_counter()

    def finish(self, result: object = None, error: Optional[BaseException] = None) -> None:
        slot = self.slot
        slot.answered_at = perf_counter()  # before the reply: the agent's next request comes after it
        try:
            if error is None:
                actions, next_states = result
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
                    data = REPLY_PICKLED + frame(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                except Exception as exc:  # noqa: BLE001 - the agent gets the error instead of a reply
                    error = RemoteError(f"the reply of task {slot.task!r} to agent {slot.agent_id}", exc)
                else:
                    write_all(self.reply_fd, data)
                    self._count()
                    return
            if isinstance(error, StoppedError):
                os.write(self.reply_fd, REPLY_STOPPED)
            else:
                write_all(self.reply_fd, REPLY_ERROR + frame(error_text(error).encode("utf-8", "replace")))
        except OSError:
            pass  # the worker is gone (EPIPE): nobody waits for this reply

    def _count(self) -> None:
        timer = self.slot.timer
        if timer is not None:  # written by the prediction loop only, replaced whole
            requests, seconds = timer.total
            timer.total = (requests + 1, seconds + perf_counter() - self.start)


class LearnRequest(Request):
    """A training request whose costs are pickled back onto the agent's reply pipe (and, given its
    ``slot``, answered at the slot's ``answered_at``)."""

    __slots__ = ("reply_fd", "slot")

    def __init__(
        self, agent_id: int, batch: Transition[np.ndarray], reply_fd: int, slot: Optional[Slot] = None
    ) -> None:
        super().__init__(agent_id, batch)
        self.reply_fd = reply_fd
        self.slot = slot

    def finish(self, result: object = None, error: Optional[BaseException] = None) -> None:
        if self.slot is not None:
            self.slot.answered_at = perf_counter()
        data = None
        if error is None:
            try:
                data = REPLY_COSTS + frame(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as exc:  # noqa: BLE001 - the agent gets the error instead of the costs
                error = RemoteError(f"sending the costs to agent {self.agent_id}", exc)
        try:
            if data is None and isinstance(error, StoppedError):
                data = REPLY_STOPPED
            elif data is None:
                data = REPLY_ERROR + frame(error_text(error).encode("utf-8", "replace"))
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
        specs: Tuple[List[Spec], List[Spec], List[Spec], List[Spec]],
        slot: Slot,
        request_fd: int,
        reply_fd: int,
        send: Callable[[object], None],
        stopped: threading.Event,
        publish_counters: Callable[[], None],
    ) -> None:
        self.agent_id = agent_id
        self.input_specs, self.state_specs, self.action_specs, self.reward_specs = specs
        self._slot = slot
        self._number = SLOT_NUMBER.pack(slot.number)
        self._request_fd = request_fd
        self._reply_fd = reply_fd
        self._send = send
        self._stopped = stopped
        self._publish_counters = publish_counters
        self._what = f"task {slot.task!r}"

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
        pickled = self._wait(b"")
        if pickled is not None:
            return pickled
        return (
            {name: view.copy() for name, view in slot.actions.items()},
            {name: view.copy() for name, view in slot.next_states.items()},
        )

    def learn(self, batch: Transition[np.ndarray]) -> Dict[str, object]:
        """Send a training batch (pickled: a Transition is a tuple of its fields); returns the costs of
        the update."""
        if self._stopped.is_set():
            raise StoppedError("the worker is stopping")
        self._publish_counters()
        self._send(("learn", self._slot.number, batch))
        return self._wait(REPLY_COSTS)

    def _wait(self, expected: bytes) -> object:
        """Block for this agent's reply: None for REPLY_OK (the reply is in the slot), else what was pickled."""
        while True:
            code = os.read(self._reply_fd, 1)
            if code == REPLY_OK and not expected:
                return None
            if code == REPLY_PICKLED and not expected:
                return pickle.loads(read_frame(self._reply_fd))
            if code == REPLY_COSTS and expected == REPLY_COSTS:
                return pickle.loads(read_frame(self._reply_fd))
            if code == REPLY_ERROR:
                raise TransportedError(read_frame(self._reply_fd).decode("utf-8", "replace"))
            if code == REPLY_STOPPED or not code:
                raise StoppedError("the robot was stopped while this agent waited for a reply")
            # An unexpected code (left from a request given up on): wait on, unless stopping.
            if self._stopped.is_set():
                raise StoppedError("the worker is stopping")
