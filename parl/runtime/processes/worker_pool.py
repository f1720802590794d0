"""WorkerPool: a robot's agents in forked worker processes, served by the parent's wrappers.

    manager = parl.Manager(tasks, placement=ProcessesOptions(workers=2))  # tasks and wrappers: in this process
    for i in range(8):
        manager.add_agent(MyAgent(make_env(), num_games=100), {"RL": parl.OnPolicyHelper()})
    manager.start()                  # starts the wrappers, then forks the workers (ProcessRunner)
    episodes = manager.join()

or, without a Manager's agent loop, around any started wrappers:

    pool = WorkerPool(agents, wrappers, workers=2, on_episode=records.append, on_error=errors.append)
    pool.start(); pool.join(); pool.stop()

Workers are forked (``multiprocessing.get_context("fork")``) after the agents
exist, so agents, helpers and environments built in the parent go along
unchanged; agent ``i`` goes to worker ``i % workers``. Inside a worker every
agent runs its episodes in its own thread, exactly as :class:`~parl.Manager`
runs them, and each helper talks to the parent through a
:class:`~parl.runtime.processes.shm_transport.ShmCommunicator` (predictions through
shared memory, training batches as :mod:`parl.wire` frames; see
:mod:`parl.runtime.processes.shm_transport`). Agents in workers must not run Paddle
themselves: the models live in the parent.

What crosses back to the parent:

- episode records and agent errors (an :class:`~parl.AgentError` with the agent's id, its
  episode and the worker-side traceback text; the exception crosses as data, see
  :mod:`parl.runtime.error_data`), on the worker's message pipe, as :mod:`parl.wire`
  frames: nothing a worker sends is unpickled;
- live counters: each agent's ``episode`` and ``total_steps`` (GymAgent) in a shared int64
  array, copied onto the parent's agent objects every :data:`COUNTER_INTERVAL` seconds, so
  ``manager.agents[i].total_steps`` reads as it does with threads.

One parent thread per worker (``parl-worker-<k>-io``) turns the worker's
requests into wrapper requests and watches the process. A worker that dies
(SIGKILL, a crash) is noticed through its process sentinel: each of its
unfinished agents is reported as an AgentError whose ``original`` is a
:class:`WorkerError` naming the worker (``parl-worker-1``), its pid, how it
ended and its agents; the agents end, or with ``restart_workers=True`` are
forked again from the parent's copies (taking up their live ``episode`` and
``total_steps``; experience gathered in the dead worker is lost). Other
workers go on. Workers die with the parent: PR_SET_PDEATHSIG (Linux, tied to
the parent's I/O thread that forked them) and a parent-alive check on the
control pipe.

The parent trusts no pipe. A frame that does not decode, a message of an
unknown kind or shape, or a slot number not of the worker's agents ends that
worker (SIGKILL to its pid) and is reported like a death, the WorkerError
naming the problem (``was ended by the parent: its message pipe carried ...``).
A worker that sends nothing for ``heartbeat_timeout`` seconds (stopped by
SIGSTOP, deadlocked, its interpreter stuck) is ended and reported the same
way. Any traffic counts; besides, each worker's control thread sends a small
``alive`` message every ``heartbeat_timeout / 5`` seconds, so nothing is added
per step.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from parl.core.agent import Agent
from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.errors import AgentError, StoppedError
from parl.runtime.asynchronous import bound_staleness, hand_over_segments, staleness_metrics
from parl.runtime.error_data import describe_agent_error, rebuild_agent_error
from parl.runtime.processes.options import ProcessesOptions
from parl.runtime.processes.shm_transport import (
    REPLY_STOPPED,
    SLOT_NUMBER,
    LearnReply,
    SharedArena,
    ShmCommunicator,
    Slot,
    SlotReply,
    receive_message,
    send_message,
)
from parl.runtime.runner import AgentRunner, Restarts, RunnerContext, play_games
from parl.runtime.watchdog import idle_agents
from parl.serving.computation_wrapper import ComputationWrapper
from parl.serving.request import Request
from parl.validation import check_int, check_positive

logger = logging.getLogger("parl")

#: Seconds between copies of the workers' live counters onto the parent's agents.
COUNTER_INTERVAL = 0.02
#: Seconds a worker's I/O thread waits in one poll (bounds how late it sees a stop).
POLL_SECONDS = 0.05
#: Seconds between a worker's checks that its parent is alive.
PARENT_CHECK_SECONDS = 0.5
#: Default seconds of silence after which the parent ends a worker (option ``heartbeat_timeout``):
#: long enough for a worker starved of CPU on a busy machine, short enough to notice a stop.
HEARTBEAT_TIMEOUT = 20.0
#: Heartbeats a worker sends per ``heartbeat_timeout``.
HEARTBEATS_PER_TIMEOUT = 5

#: What a worker sends on its message pipe: kind -> length of the message list.
_MESSAGE_ARITY = {"learn": 3, "episode": 2, "error": 4, "done": 2, "exit": 1, "alive": 1}

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_NO_COUNT = -1  # total_steps of an agent that keeps none


class WorkerError(RuntimeError):
    """A worker process ended before its agents finished: which worker, which pid, how, which agents.

    ``reason`` is set when the parent ended the worker (a frame that does not decode, a silence
    longer than the heartbeat timeout) and says why.
    """

    def __init__(
        self,
        name: str,
        pid: Optional[int],
        exitcode: Optional[int],
        agent_ids: Sequence[int],
        fate: str,
        reason: Optional[str] = None,
    ):
        self.name = name
        self.pid = pid
        self.exitcode = exitcode
        self.agent_ids = list(agent_ids)
        self.reason = reason
        if reason is not None:
            how = f"was ended by the parent: {reason}"
        elif exitcode is not None and exitcode < 0:
            try:
                how = f"was killed by signal {signal.Signals(-exitcode).name}"
            except ValueError:
                how = f"was killed by signal {-exitcode}"
        else:
            how = f"exited with code {exitcode}"
        super().__init__(f"worker process {name} (pid {pid}) {how}; its agents {self.agent_ids} {fate}")


class _Worker:
    """Parent-side state of one worker slot (one process, then its restarts)."""

    def __init__(self, index: int, agent_positions: List[int]) -> None:
        self.index = index
        self.name = f"parl-worker-{index}"
        self.positions = agent_positions  # indices into the pool's agents still owned
        self.process: Optional[multiprocessing.process.BaseProcess] = None
        self.request_fd = -1  # parent reads slot numbers
        self.message_fd = -1  # parent reads framed messages
        self.control_fd = -1  # parent writes framed messages
        self.reply_fds: Dict[int, int] = {}  # agent id -> the parent's write end of its reply pipe
        self.exited = False  # the worker said goodbye before ending
        self.fault: Optional[str] = None  # why the parent ended the worker
        self.restarts = 0
        self.started = threading.Event()
        self.start_error: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None


class WorkerPool:
    """Runs agents in ``workers`` forked processes against the parent's wrappers.

    Args:
        agents: the agents, with their helpers bound (``Manager.add_agent``); ids must be their indices.
        wrappers: task name -> the wrapper serving it (started by the caller, before or after :meth:`start`).
        workers: number of worker processes (at most one per agent is used).
        restart_workers: fork a dead worker's unfinished agents again instead of ending them.
        max_restarts: restarts allowed per worker before its agents are ended and reported.
        heartbeat_timeout: seconds a worker may send nothing before it is ended (and reported, or
            restarted) as a worker that stopped answering.
        on_episode: called in a parent I/O thread with each finished episode's record
            (``agent_id``, ``episode``, ``seconds`` and what ``run_one_episode`` returned).
        on_error: called with each :class:`~parl.AgentError` (an agent's exception, or a dead worker).

    Raises:
        ValueError: no agents, a bad number of workers or timeout, or an agent whose helper names no
            wrapper.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        wrappers: Mapping[str, ComputationWrapper],
        *,
        workers: int,
        restart_workers: bool = False,
        max_restarts: int = 3,
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT,
        on_episode: Optional[Callable[[Dict[str, object]], None]] = None,
        on_error: Optional[Callable[[AgentError], None]] = None,
        agent_restarts: Optional[Mapping[int, Restarts]] = None,
    ) -> None:
        check_int("workers", workers, 1)
        check_int("max_restarts", max_restarts, 0)
        self.heartbeat_timeout = check_positive("heartbeat_timeout", heartbeat_timeout)
        if not agents:
            raise ValueError("WorkerPool needs at least one agent, got none")
        if not isinstance(restart_workers, bool):
            raise ValueError(f"restart_workers must be True or False, got {restart_workers!r}")
        self.agents = list(agents)
        self.wrappers = dict(wrappers)
        self.restart_workers = restart_workers
        self.max_restarts = max_restarts
        self._on_episode = on_episode or (lambda record: None)
        self._on_error = on_error or (lambda error: None)
        #: Agent id -> how the agent is restarted after a failed episode (in its worker).
        self.agent_restarts = dict(agent_restarts or {})
        #: Deaths of workers that were restarted (not errors: their agents went on).
        self.restarts: List[WorkerError] = []
        #: Deaths of workers whose agents ended (each also reported per agent through ``on_error``).
        self.worker_errors: List[WorkerError] = []

        # Slots and counters, laid out before the fork.
        self._arena = SharedArena()
        self._slots: List[Slot] = []
        self._slot_of: Dict[tuple, Slot] = {}
        for position, agent in enumerate(self.agents):
            if agent.id != position:
                raise ValueError(f"agent at index {position} has id {agent.id}; add agents with Manager.add_agent")
            for key, helper in agent.helpers.items():
                task = helper.task_name or key
                if task not in self.wrappers:
                    raise ValueError(f"agent {agent.id} has a helper for task {task!r}, which has no wrapper")
                comm = helper.communicator
                slot = Slot(len(self._slots), agent.id, task, self._arena, comm.specs)
                slot.timer = self.wrappers[task].stats.prediction_timer()
                self._slots.append(slot)
                self._slot_of[(position, key)] = slot
        counters_handle = self._arena.reserve((len(self.agents), 2), np.int64)
        version_handles = {task: self._arena.reserve((1,), np.int64) for task in self.wrappers}
        self._arena.allocate()
        #: Task -> the cell in shared memory that holds its wrapper's weights version.
        self.versions = {task: self._arena.array(handle) for task, handle in version_handles.items()}
        for task, cell in self.versions.items():
            self.wrappers[task].share_version(cell)
        for slot in self._slots:
            slot.bind_views(self._arena)
        self._slots_of_agent: Dict[int, List[Slot]] = {agent.id: [] for agent in self.agents}
        for slot in self._slots:
            self._slots_of_agent[slot.agent_id].append(slot)
        #: Live (episode, total_steps) per agent, written by the workers.
        self.counters = self._arena.array(counters_handle)
        self._done = np.zeros(len(self.agents), dtype=bool)  # agent loop ended (parent's view)
        self._forked_at = np.zeros(len(self.agents))  # perf_counter() when each agent's process was forked

        count = min(workers, len(self.agents))
        self._workers = [_Worker(k, list(range(k, len(self.agents), count))) for k in range(count)]
        self._context = multiprocessing.get_context("fork")
        self._fork_lock = threading.Lock()
        self._control_lock = threading.Lock()
        self._parent_fds: Set[int] = set()  # every parent-side fd of every worker, closed in children
        self._stopping = threading.Event()
        self._started = False
        self._closed = False
        self._retired_fds: List[int] = []

    # -- public ----------------------------------------------------------------
    @property
    def worker_names(self) -> List[str]:
        """``parl-worker-0``, ``parl-worker-1``, ..."""
        return [w.name for w in self._workers]

    def pids(self) -> Dict[str, Optional[int]]:
        """Worker name -> pid of its current process."""
        return {w.name: (w.process.pid if w.process is not None else None) for w in self._workers}

    def agents_of(self, name: str) -> List[int]:
        """Ids of the agents a worker runs."""
        for w in self._workers:
            if w.name == name:
                return [self.agents[p].id for p in w.positions]
        raise ValueError(f"no worker named {name!r}; workers are {self.worker_names}")

    def idle_agents(self) -> Dict[int, float]:
        """Agent id -> the ``perf_counter()`` reading since which it has waited on no request here,
        for the agents not done (see :mod:`parl.runtime.watchdog`; an agent's requests are seen as
        they arrive in this process and are answered)."""
        playing = {self.agents[p].id: float(self._forked_at[p]) for p in np.flatnonzero(~self._done)}
        slots = self._slots_of_agent
        return idle_agents(playing, lambda i: [(s.requested_at, s.answered_at) for s in slots[i]])

    def start(self) -> None:
        """Fork the workers (each from its own parent I/O thread, which then serves it)."""
        if self._started:
            raise RuntimeError("WorkerPool is already started")
        self._started = True
        for position, agent in enumerate(self.agents):
            self.counters[position, 0] = agent.episode
            steps = getattr(agent, "total_steps", None)
            self.counters[position, 1] = steps if isinstance(steps, int) else _NO_COUNT
        for worker in self._workers:
            worker.thread = threading.Thread(target=self._serve, args=(worker,), name=f"{worker.name}-io", daemon=True)
            worker.thread.start()
        for worker in self._workers:
            worker.started.wait()
        failed = [w.start_error for w in self._workers if w.start_error is not None]
        if failed:
            self.stop()
            raise RuntimeError(f"could not start the worker processes: {failed[0]!r}") from failed[0]

    def running(self) -> bool:
        """Whether any worker still runs agents (or its end is still being gathered)."""
        return any(w.thread is not None and w.thread.is_alive() for w in self._workers)

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait until every worker has ended (agents finished, failed or killed); True if they have."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self._workers:
            if worker.thread is not None:
                worker.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._sync_counters()
        return not self.running()

    def request_stop(self) -> None:
        """Ask every worker to stop its agents (returns at once; :meth:`stop` waits)."""
        with self._fork_lock:
            if self._stopping.is_set() or self._closed:
                return
            self._stopping.set()
            for worker in self._workers:
                if worker.control_fd < 0:
                    continue
                try:
                    send_message(worker.control_fd, self._control_lock, ["stop"])
                except OSError:
                    pass  # already gone

    def stop(self, timeout: float = 5.0) -> List[str]:
        """Stop the workers: each gets ``timeout / 4`` seconds (at most 1) to end its agents,
        then is killed; returns the names of parent I/O threads still running at ``timeout``
        (none unless a wrapper call never returns). No worker process survives this call."""
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        self.request_stop()
        grace = time.monotonic() + min(1.0, timeout / 4)
        for worker in self._workers:
            process = worker.process
            if process is not None:
                process.join(max(0.0, grace - time.monotonic()))
        for worker in self._workers:
            process = worker.process
            if process is not None and process.is_alive():
                process.kill()
        for worker in self._workers:
            process = worker.process
            if process is not None:
                process.join(max(0.1, deadline - time.monotonic()))
        for worker in self._workers:
            if worker.thread is not None:
                worker.thread.join(max(0.0, deadline - time.monotonic()))
        self._sync_counters()
        alive = [w.thread.name for w in self._workers if w.thread is not None and w.thread.is_alive()]
        if not alive and not any(w.alive for w in self.wrappers.values()):
            self._close_fds()  # no thread can write a reply any more
        return alive

    # -- parent: one I/O thread per worker ------------------------------------------
    def _serve(self, worker: _Worker) -> None:
        try:
            self._fork(worker)
        except BaseException as exc:  # noqa: BLE001 - handed to start()
            worker.start_error = exc
            worker.started.set()
            return
        worker.started.set()
        while True:
            self._serve_until_exit(worker)
            if worker.exited or self._stopping.is_set():
                return
            ending = [p for p in worker.positions if not self._done[p]]
            ids = [self.agents[p].id for p in ending]
            restart = self.restart_workers and ending and worker.restarts < self.max_restarts
            process = worker.process
            assert process is not None  # forked before it is served
            fate = "are restarted" if restart else "end"
            error = WorkerError(worker.name, process.pid, process.exitcode, ids, fate, worker.fault)
            if not ending:
                logger.warning("%s", error)
                return
            if restart:
                logger.warning("%s", error)
                self.restarts.append(error)
                worker.restarts += 1
                worker.positions = ending
                for p in ending:
                    self._take_up_counters(p)
                try:
                    self._fork(worker)
                    continue
                except StoppedError:
                    return  # the pool stopped meanwhile
                except Exception as exc:  # noqa: BLE001 - reported below, as an ended worker
                    error = WorkerError(worker.name, None, None, ids, f"end (restart failed: {exc!r})")
            self.worker_errors.append(error)
            for p in ending:
                self._done[p] = True
                self._on_error(AgentError(self.agents[p].id, int(self.counters[p, 0]), error))
            return

    def _serve_until_exit(self, worker: _Worker) -> None:
        process = worker.process
        assert process is not None  # forked before it is served
        request_fd, message_fd, sentinel = worker.request_fd, worker.message_fd, process.sentinel
        poller = select.poll()
        for fd in (request_fd, message_fd, sentinel):
            poller.register(fd, select.POLLIN)
        leftover = b""
        now = time.monotonic()
        next_sync, heard = now + COUNTER_INTERVAL, now
        while True:
            dead = False
            events = poller.poll(POLL_SECONDS * 1000)
            now = time.monotonic()
            try:
                for fd, _ in events:
                    if fd == request_fd:
                        data = os.read(request_fd, 65536)
                        if not data:
                            poller.unregister(request_fd)
                            continue
                        requests: List[Request[SlotReply]] = []
                        leftover = self._requests(worker, leftover + data, requests)
                        self._queue(requests)
                    elif fd == message_fd:
                        if not self._handle_message(worker, receive_message(message_fd)):
                            poller.unregister(message_fd)
                    else:
                        dead = True
            except ValueError as exc:
                self._end(worker, f"its {'request' if fd == request_fd else 'message'} pipe carried {exc}")
                for pipe in (request_fd, message_fd):
                    try:
                        poller.unregister(pipe)
                    except KeyError:  # already at its end of file
                        pass
            if events:
                heard = now  # any traffic is a heartbeat
            elif now - heard > self.heartbeat_timeout and worker.fault is None:
                self._end(
                    worker, f"it sent nothing for {now - heard:.1f} s (heartbeat_timeout {self.heartbeat_timeout:g} s)"
                )
            if now >= next_sync:
                next_sync = now + COUNTER_INTERVAL
                self._sync_counters(worker.positions)
            if dead:
                break
        # The process has ended: gather what it sent before (unless what it sent is why it ended).
        while worker.fault is None and _readable(message_fd, 0.0):
            try:
                if not self._handle_message(worker, receive_message(message_fd)):
                    break
            except ValueError as exc:
                worker.fault = f"its message pipe carried {exc}"
        process.join()
        self._sync_counters(worker.positions)

    def _end(self, worker: _Worker, reason: str) -> None:
        """End a worker that broke the protocol or stopped answering: SIGKILL to the process this
        pool forked (a stopped one included); its death is then reported with ``reason``."""
        worker.fault = reason
        process = worker.process
        assert process is not None  # a worker is ended once forked
        logger.warning("ending %s (pid %s): %s", worker.name, process.pid, reason)
        process.kill()

    def _requests(self, worker: _Worker, data: bytes, into: List[Request[SlotReply]]) -> bytes:
        """One prediction request per slot number in ``data``, appended to ``into``; returns an
        incomplete tail.

        Raises:
            ValueError: a slot number that is not one of the worker's agents' (nothing is queued).
        """
        whole = len(data) - len(data) % SLOT_NUMBER.size
        slots, reply_fds = self._slots, worker.reply_fds
        requests = []
        for (number,) in SLOT_NUMBER.iter_unpack(data[:whole]):
            if number >= len(slots) or slots[number].agent_id not in reply_fds:
                raise ValueError(f"slot number {number}, which is not one of {worker.name}'s agents'")
            slot = slots[number]
            slot.requested_at = time.perf_counter()
            requests.append(Request(slot.agent_id, slot.payload, SlotReply(slot, reply_fds[slot.agent_id])))
        into.extend(requests)
        return data[whole:]

    def _queue(self, requests: List[Request[SlotReply]]) -> None:
        """Put prediction requests on their tasks' queues (a stopped wrapper answers them at once)."""
        for request in requests:
            try:
                self.wrappers[request.reply.slot.task].prediction_queue.put(request)
            except StoppedError as exc:
                request.finish(error=exc)

    def _handle_message(self, worker: _Worker, message: Any) -> bool:
        """Act on one message from a worker; False at end of file.

        Raises:
            ValueError: a message of an unknown kind or shape, or about an agent not of the worker.
        """
        if message is None:
            return False
        kind = message[0] if isinstance(message, list) and message else None
        arity = _MESSAGE_ARITY.get(kind) if isinstance(kind, str) else None
        if arity is None or arity != len(message):
            raise ValueError(f"a message that is not one of {sorted(_MESSAGE_ARITY)}: {_brief(message)}")
        if kind == "learn":
            _, number, batch = message
            slot = self._own_slot(worker, number)
            slot.requested_at = time.perf_counter()
            if isinstance(batch, tuple) and len(batch) == len(Transition._fields):
                batch = Transition(*batch)  # else the wrapper tells the agent what it sent
            request = Request(slot.agent_id, batch, LearnReply(slot, worker.reply_fds[slot.agent_id]))
            try:
                self.wrappers[slot.task].training_queue.put(request)
            except StoppedError as exc:
                request.finish(error=exc)
        elif kind == "episode":
            record = message[1]
            if not (isinstance(record, dict) and self._own_agent(worker, record.get("agent_id"))):
                raise ValueError(f"an episode record of no agent of {worker.name}: {_brief(record)}")
            self._on_episode(record)
        elif kind == "error":
            _, agent_id, episode, described = message
            if not (self._own_agent(worker, agent_id) and type(episode) is int and isinstance(described, dict)):
                raise ValueError(f"an error message of no agent of {worker.name}: {_brief(message)}")
            self._on_error(rebuild_agent_error(agent_id, episode, described))
        elif kind == "done":
            position = message[1]
            if not self._own_agent(worker, position):  # positions are agent ids
                raise ValueError(f"a 'done' of no agent of {worker.name}: {_brief(position)}")
            self._done[position] = True
        elif kind == "exit":
            worker.exited = True
        return True

    def _own_slot(self, worker: _Worker, number: object) -> Slot:
        if type(number) is not int or not 0 <= number < len(self._slots):
            raise ValueError(f"a slot number {_brief(number)} out of range")
        slot = self._slots[number]
        if slot.agent_id not in worker.reply_fds:
            raise ValueError(f"slot number {number}, which is not one of {worker.name}'s agents'")
        return slot

    def _own_agent(self, worker: _Worker, agent_id: object) -> bool:
        return type(agent_id) is int and agent_id in worker.reply_fds

    def _sync_counters(self, positions: Optional[Sequence[int]] = None) -> None:
        """Copy the live counters onto the parent's agent objects."""
        counters = self.counters
        for p in range(len(self.agents)) if positions is None else positions:
            agent = self.agents[p]
            agent.episode = int(counters[p, 0])
            steps = int(counters[p, 1])
            if steps != _NO_COUNT and hasattr(agent, "total_steps"):
                agent.total_steps = steps

    def _take_up_counters(self, position: int) -> None:
        """Before a restart: the parent's copy of the agent goes on from its live counters."""
        self._sync_counters([position])

    # -- forking ------------------------------------------------------------------------
    def _fork(self, worker: _Worker) -> None:
        """Make the worker's pipes and fork its process (from the calling I/O thread, so
        PR_SET_PDEATHSIG follows that thread's life)."""
        with self._fork_lock:
            if self._stopping.is_set():
                raise StoppedError(f"the pool is stopping; {worker.name} is not forked")
            if worker.reply_fds:  # a restart: retire the old ends (stale replies may still be written)
                self._retired_fds.extend([worker.request_fd, worker.message_fd, worker.control_fd])
                self._retired_fds.extend(worker.reply_fds.values())
                self._parent_fds.difference_update(self._retired_fds)
            request_r, request_w = os.pipe()
            message_r, message_w = os.pipe()
            control_r, control_w = os.pipe()
            replies = {self.agents[p].id: os.pipe() for p in worker.positions}
            worker.request_fd, worker.message_fd, worker.control_fd = request_r, message_r, control_w
            worker.reply_fds = {agent_id: w for agent_id, (_, w) in replies.items()}
            worker.exited = False
            worker.fault = None
            parent_fds = {request_r, message_r, control_w, *worker.reply_fds.values()}
            self._parent_fds.update(parent_fds)
            child = {
                "request_fd": request_w,
                "message_fd": message_w,
                "control_fd": control_r,
                "reply_fds": {agent_id: pair for agent_id, pair in replies.items()},
                "keep": set(worker.reply_fds.values()),
                "heartbeat_interval": self.heartbeat_timeout / HEARTBEATS_PER_TIMEOUT,
                "close": set(self._parent_fds) - set(worker.reply_fds.values()),
            }
            process = self._context.Process(
                target=_worker_main, args=(self, worker, child, os.getpid()), name=worker.name, daemon=True
            )
            try:
                process.start()
            finally:
                for fd in (request_w, message_w, control_r, *(r for r, _ in replies.values())):
                    os.close(fd)
            worker.process = process
            self._forked_at[worker.positions] = time.perf_counter()

    def _close_fds(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in list(self._parent_fds) + self._retired_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._parent_fds.clear()
        self._retired_fds.clear()


# -- worker process ------------------------------------------------------------------------


def _prctl(option: int, value: object) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent-alive check alone


def _worker_main(pool: WorkerPool, worker: _Worker, child: Dict[str, Any], parent_pid: int) -> None:
    """Entry of a worker process; never returns (os._exit)."""
    code = 1
    try:
        # Objects inherited from the parent are never collected here: a collection could run
        # Paddle destructors whose locks belonged to threads that do not exist in this process.
        gc.freeze()
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)
        _prctl(_PR_SET_NAME, worker.name.encode()[:15])
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in child["close"]:
            try:
                os.close(fd)
            except OSError:
                pass
        code = _WorkerRuntime(pool, worker, child, parent_pid).run()
    except BaseException:  # noqa: BLE001 - the parent reports the exit code
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class _WorkerRuntime:
    """Inside a worker: the agents' threads, the message pipe and the control pipe."""

    def __init__(self, pool: WorkerPool, worker: _Worker, child: Dict[str, Any], parent_pid: int) -> None:
        self.pool = pool
        self.worker = worker
        self.parent_pid = parent_pid
        self.message_fd: int = child["message_fd"]
        self.control_fd: int = child["control_fd"]
        self.reply_fds: Dict[int, tuple] = child["reply_fds"]
        self.send_lock = threading.Lock()
        self.stopped = threading.Event()
        self.grace = 1.0
        self.heartbeat_interval: float = child["heartbeat_interval"]
        counters = pool.counters
        for position in worker.positions:
            agent = pool.agents[position]
            reply_r, _ = self.reply_fds[agent.id]
            for key, helper in agent.helpers.items():
                # The helper was bound in the parent with these same specs: only the transport changes.
                helper._set_transport(
                    ShmCommunicator(
                        agent_id=agent.id,
                        specs=helper.communicator.specs,
                        slot=pool._slot_of[(position, key)],
                        request_fd=child["request_fd"],
                        reply_fd=reply_r,
                        send=self.send,
                        stopped=self.stopped,
                        publish_counters=_counter_publisher(agent, counters[position]),
                        version=pool.versions[pool._slot_of[(position, key)].task],
                    )
                )

    def send(self, message: object) -> None:
        send_message(self.message_fd, self.send_lock, message)

    def run(self) -> int:
        threads = []
        for position in self.worker.positions:
            agent = self.pool.agents[position]
            thread = threading.Thread(
                target=self._run_agent, args=(agent, position), name=f"parl-agent-{agent.id}", daemon=True
            )
            threads.append(thread)
        control = threading.Thread(target=self._control, name="parl-worker-control", daemon=True)
        control.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive() and not self.stopped.is_set():
                thread.join(POLL_SECONDS)
        if self.stopped.is_set():
            deadline = time.monotonic() + self.grace
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        self.send(["exit"])
        return 0

    def _run_agent(self, agent: Agent, position: int) -> None:
        publish = _counter_publisher(agent, self.pool.counters[position])

        def on_episode(record: Dict[str, float]) -> None:
            # Counted (by play_games) before it is sent: a worker killed in between loses the record,
            # and a restart never plays the episode twice.
            publish()
            try:
                self.send(["episode", record])
            except ValueError as exc:  # a value in the record that does not cross
                what = f"the record of episode {record['episode']}"
                raise _RecordError(f"{what} cannot reach the parent: {exc}") from None

        def on_error(error: AgentError) -> None:
            self.send(["error", error.agent_id, error.episode, describe_agent_error(error)])

        try:
            play_games(agent, self.stopped.is_set, on_episode, on_error, self.pool.agent_restarts.get(agent.id))
        except _RecordError as exc:
            on_error(AgentError(agent.id, agent.episode - 1, exc))
        except OSError:
            os._exit(1)  # the parent is gone
        finally:
            publish()
            try:
                self.send(["done", position])
            except OSError:
                pass

    def _control(self) -> None:
        """Wait for the parent's stop; send a heartbeat every ``heartbeat_interval``; end the worker
        if the parent dies or its control pipe carries what does not decode."""
        wait = min(PARENT_CHECK_SECONDS, self.heartbeat_interval)
        next_beat = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_beat:
                next_beat = now + self.heartbeat_interval
                try:
                    self.send(["alive"])
                except OSError:
                    os._exit(1)  # the parent is gone
            ready = _readable(self.control_fd, wait)
            if os.getppid() != self.parent_pid:
                os._exit(1)
            if not ready:
                continue
            try:
                message = receive_message(self.control_fd)
            except ValueError as exc:
                print(f"{self.worker.name}: its control pipe carried {exc}", file=sys.stderr, flush=True)
                os._exit(2)
            if message is None:  # end of file: the parent closed or died
                os._exit(1)
            if message == ["stop"]:
                self.stopped.set()
                for _, reply_w in self.reply_fds.values():
                    try:
                        os.write(reply_w, REPLY_STOPPED)  # wakes an agent waiting for a reply
                    except OSError:
                        pass
                return


class _RecordError(ValueError):
    """An episode record that cannot be sent to the parent (a value :mod:`parl.wire` does not carry)."""


def _counter_publisher(agent: Agent, row: np.ndarray) -> Callable[[], None]:
    """Writes the agent's ``episode`` and ``total_steps`` into its shared counter row."""

    def publish() -> None:
        row[0] = agent.episode
        steps = getattr(agent, "total_steps", None)
        if isinstance(steps, int):
            row[1] = steps

    return publish


# -- Manager placement ----------------------------------------------------------------------


class ProcessRunner(AgentRunner):
    """``Manager(..., placement=ProcessesOptions(workers=N))``: the Manager's agents in a :class:`WorkerPool`.

    Options (``context.options``, a :class:`~parl.runtime.processes.options.ProcessesOptions`):
    ``workers`` (None: one per core), ``restart_workers`` and ``heartbeat_timeout`` (seconds; None:
    :data:`HEARTBEAT_TIMEOUT`).

    Helpers are bound to in-process communicators in the parent (they give the specs);
    each worker swaps in its shared-memory transport after the fork. Episodes and
    errors reach the Manager through ``on_episode`` and ``on_error``.
    """

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        options: ProcessesOptions = context.options
        self.workers = options.workers if options.workers is not None else _default_workers()
        self.restart_workers = options.restart_workers
        self.heartbeat_timeout = HEARTBEAT_TIMEOUT if options.heartbeat_timeout is None else options.heartbeat_timeout
        self._on_episode = context.record_episode
        self._on_error = context.record_error
        #: The pool, once started.
        self.pool: Optional[WorkerPool] = None

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        return wrapper.communicator(agent_id)

    def start(self) -> None:
        if not self.context.agents:
            return
        options: ProcessesOptions = self.context.options
        if options.asynchronous:
            hand_over_segments(self.context.agents, options.segments_in_flight)
        bound_staleness(self.context.wrappers, options.max_staleness)
        self.pool = WorkerPool(
            self.context.agents,
            self.context.wrappers,
            workers=self.workers,
            restart_workers=self.restart_workers,
            heartbeat_timeout=self.heartbeat_timeout,
            on_episode=self._on_episode,
            on_error=self._on_error,
            agent_restarts=self.context.restarts,
        )
        self.pool.start()

    def running(self) -> bool:
        return self.pool is not None and self.pool.running()

    def join(self, deadline: Optional[float]) -> None:
        if self.pool is not None:
            self.pool.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stop(self, deadline: float) -> List[str]:
        if self.pool is None:
            return []
        return self.pool.stop(max(0.2, deadline - time.monotonic()))

    def idle_agents(self) -> Dict[int, float]:
        return {} if self.pool is None else self.pool.idle_agents()

    def metrics(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """With ``asynchronous`` or ``max_staleness`` set, ``async/<task>/staleness_mean`` and ``_max``
        (segments learned since the last call) and ``async/<task>/dropped_segments`` (so far)."""
        options: ProcessesOptions = self.context.options
        if not options.asynchronous and options.max_staleness is None:
            return []
        return [(None, staleness_metrics(self.context.wrappers))]

    def wake(self) -> None:
        if self.pool is not None and self.context.stopping.is_set():
            self.pool.request_stop()  # a head start while the Manager stops the wrappers


def _default_workers() -> int:
    """One worker per core this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _brief(value: object) -> str:
    """``repr(value)``, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data or its end of file within ``timeout`` seconds (poll: any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))
