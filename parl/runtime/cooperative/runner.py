"""Cooperative placement: every agent is a greenlet in one scheduler thread.

    manager = parl.Manager(tasks, placement="cooperative")   # the agents' code is unchanged

``helper.predict`` parks the calling agent: it queues its request and switches
straight to the next agent whose row is ready, or, with none left, to the
scheduler (the thread's main greenlet), which runs this loop::

    start every agent: each runs until its first predict (or learn) parks it
    while some agent is alive and the Manager is not stopping:
        resume the agents whose training replies have come back
        for each task with parked predictions, unless its wrapper is paused:
            take up to max_batchsize of them, check and stack their samples (a sample
            that breaks the specs or holds a NaN or an infinity raises its ValueError in
            its own agent), task.predict
            once (in this thread), resume the agents of the batch one after the other,
            each with its row:
            it steps its env and, parking at its next predict, switches to the next
        nothing to do: wait on a condition (a training reply, resume, stop), 50 ms at most

A greenlet switch there and back measured 1.0 us here, against 12 us for a
hand-off between OS threads through a lock (docs/performance.md), and a batch
is exactly the agents that were parked, so no agent waits for a batch it missed. ``helper.learn``
puts its batch on the wrapper's training queue as in threads mode, and the
agent stays parked until the wrapper's training thread replies; the other
agents go on meanwhile.

The parking, the checks and the batching are :mod:`parl.runtime.cooperative.batching`'s (shared
with evaluation's concurrent episodes); their per-step pieces run in the C extension
``parl.runtime.cooperative._cooperative`` when it was built at install time, else as Python twins
that behave the same. ``EXTENSION`` here tells which this module's runners use
(``PARL_NO_EXTENSION=1`` turns it off).

What changes against threads mode: agents run one at a time in one thread, so
an environment step that blocks (sleeps, waits on a socket) holds up every
agent; such environments belong in threads or worker processes. One that never
returns is named by the watchdog and by ``Manager.stop`` (the other agents wait
parked meanwhile), and the scheduler thread is left behind as a daemon. A prediction
stuck inside the algorithm holds the scheduler too: ``Manager.stop`` then
reports the ``parl-cooperative`` thread as still running, as threads mode
reports the wrapper's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from time import perf_counter
from typing import Deque, Dict, List, Optional, Tuple

import greenlet
import numpy as np
from greenlet import getcurrent

from parl.affinity import pin_current_thread
from parl.core.agent import Agent
from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.core.errors import StoppedError
from parl.runtime.cooperative.batching import (
    EXTENSION,
    Parked,
    PredictionQueue,
    Row,
    hot_path,
    parked_in_c,
    serve,
    throw,
    unwind,
)
from parl.runtime.runner import AgentRunner, RunnerContext
from parl.runtime.watchdog import idle_agents
from parl.serving.communicator import InProcessCommunicator
from parl.serving.computation_wrapper import ComputationWrapper
from parl.serving.request import Reply, Request
from parl.serving.request_queue import POLL_INTERVAL

logger = logging.getLogger("parl")

ArrayDict = Dict[str, np.ndarray]

#: Times the scheduler throws StoppedError into an agent that goes on parking after it.
_KILL_TRIES = 3


class _TaskQueue(PredictionQueue):
    """The parked predictions of one wrapper's task, served through the wrapper (counted in its stats)."""

    __slots__ = ("wrapper",)

    def __init__(self, wrapper: ComputationWrapper) -> None:
        super().__init__(
            wrapper.task,
            max_batchsize=wrapper.batching.max_batchsize,
            predict_batch=wrapper.predict_batch,  # counted and checked there
            prediction_error=wrapper.prediction_error,
            # The latency every agent of this task saw, summed per batch by the scheduler (the one writer).
            timer=wrapper.stats.prediction_timer(),
        )
        self.wrapper = wrapper


class CooperativeCommunicator(Parked, InProcessCommunicator):
    """An agent's end of one wrapper when agents are greenlets of a :class:`CooperativeRunner`.

    Same interface as :class:`~parl.Communicator`: ``predict`` parks the agent
    until the scheduler's batch holds its row; ``learn`` parks it until the
    wrapper's training thread replies. The scheduler checks the parked sample
    against the specs when it stacks the batch (arrays that already fit are
    taken as they are, anything else is converted or refused) and a sample
    that breaks them raises its ValueError here, in this agent only.
    """

    _times_own_requests = False  # the scheduler sums its agents' latency per batch

    def __init__(self, agent_id: int, wrapper: ComputationWrapper, runner: "CooperativeRunner") -> None:
        super().__init__(agent_id, wrapper)
        self._runner = runner
        # Set by the scheduler thread when it starts: its hub greenlet and the agent's.
        self.attach(runner.queue(wrapper), runner.ready)
        #: The training requests handed over by put_batch, oldest first (their replies resume agents,
        #: so the requests themselves are kept, not waiters).
        self._requests_in_flight: Deque[Request[_Resume]] = deque()

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Send a training batch (already checked by the helper); returns the costs of the update."""
        if getcurrent() is not self._greenlet:
            raise self._outside_error()
        request = Request(self.agent_id, batch, _Resume(self._runner, self._greenlet))
        self._parked_at = perf_counter()
        try:
            self._wrapper.training_queue.put(request)  # StoppedError once the robot stops
            return self._hub.switch()  # parked until the scheduler resumes us with the training thread's reply
        finally:
            self._resumed_at = perf_counter()

    def put_batch(self, batch: Transition[np.ndarray]) -> None:
        """Queue a training batch for the wrapper's training thread and go on at once (no park)."""
        if getcurrent() is not self._greenlet:
            raise self._outside_error()
        request = Request(self.agent_id, batch, _Resume(self._runner, None))
        self._wrapper.training_queue.put(request)  # StoppedError once the robot stops
        self._requests_in_flight.append(request)

    def take_costs(self, wait: bool = False) -> List[Costs]:
        """The costs of the finished updates of handed-over batches, oldest first; with ``wait``, the
        agent parks until the oldest in flight is learned (the other agents go on meanwhile)."""
        in_flight = self._requests_in_flight
        done: List[Costs] = []
        while in_flight:
            request = in_flight[0]
            if not self._runner._claim(request, self._greenlet if wait and not done else None):
                if request.error is not None and done:
                    break  # raised by the next call, once these costs are taken
                in_flight.popleft()
                if request.error is not None:
                    raise request.error
                done.append(request.result)
                continue
            if not (wait and not done):
                break
            in_flight.popleft()
            self._parked_at = perf_counter()
            try:
                done.append(self._hub.switch())  # parked until the scheduler resumes us with the reply
            finally:
                self._resumed_at = perf_counter()
        return done

    def batches_in_flight(self) -> int:
        return len(self._requests_in_flight)

    def _outside_error(self) -> Exception:
        if self._runner.finished:
            return StoppedError("the robot is stopped")
        return RuntimeError(
            f"agent {self.agent_id}: a cooperative agent's helper works only inside its Manager's scheduler "
            "(from run_one_episode, after Manager.start)"
        )


#: A :class:`CooperativeCommunicator` whose request fields and ``predict`` are the extension's (the
#: same park as the Python ``predict``, in C); the Python class when the extension was not built.
_ParkedInC = parked_in_c(CooperativeCommunicator, EXTENSION, "_ParkedInC")


class _Resume(Reply):
    """The reply of a cooperative agent's training request: the scheduler resumes the agent parked on
    it, instead of a thread being woken.

    ``greenlet`` is the agent parked on the request (set at once by ``learn``; by ``take_costs`` only
    when it waits for a batch handed over with ``put_batch``), None while nobody waits: the reply
    then only marks the request ``done``. Both are read and written under the runner's lock.
    """

    __slots__ = ("runner", "greenlet", "done")

    def __init__(self, runner: "CooperativeRunner", agent: Optional[greenlet.greenlet]) -> None:
        self.runner = runner
        self.greenlet: greenlet.greenlet = agent  # None while nobody waits
        self.done = False

    def deliver(self, request: Request) -> None:
        # Called by the wrapper's training thread (or by stop): the scheduler takes it from there.
        self.runner._training_done(request, self)


class CooperativeRunner(AgentRunner):
    """Runs every agent as a greenlet in one thread, ``parl-cooperative``, that also batches and
    runs their predictions (see the module docstring)."""

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self._queues: Dict[int, _TaskQueue] = {}  # id(wrapper) -> queue
        self._communicators: Dict[int, List[CooperativeCommunicator]] = {}  # agent id -> its communicators
        self._cond = threading.Condition(threading.Lock())
        self._replies: List[Request[_Resume]] = []  # training requests finished whose agents are to be resumed
        #: Agents whose prediction rows are ready, with their rows, last to run first: each agent
        #: that parks hands over to the last one (agent to agent: one switch per step).
        self.ready: List[Tuple[Parked, Row]] = []
        self._thread: Optional[threading.Thread] = None
        self._live = 0
        self._playing: Dict[int, float] = {}  # agent id -> when it began to play
        #: True once the scheduler has ended.
        self.finished = False
        # The per-step pieces: the extension's, or their Python twins (the same behaviour).
        extension = EXTENSION
        self._communicator_class = CooperativeCommunicator if extension is None else _ParkedInC
        self._hot_path = hot_path(extension)

    # -- AgentRunner ------------------------------------------------------------
    def queue(self, wrapper: ComputationWrapper) -> _TaskQueue:
        """The parked predictions of ``wrapper``'s task."""
        queue = self._queues.get(id(wrapper))
        if queue is None:
            queue = self._queues[id(wrapper)] = _TaskQueue(wrapper)
        return queue

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        comm = self._communicator_class(agent_id, wrapper, self)
        self._communicators.setdefault(agent_id, []).append(comm)
        return comm

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="parl-cooperative", daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, deadline: Optional[float]) -> None:
        if self._thread is not None:
            self._thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stop(self, deadline: float) -> List[str]:
        self.wake()
        self.join(deadline)
        return [self._thread.name] if self._thread is not None and self.running() else []

    def wake(self) -> None:
        self._wake_scheduler()

    def idle_agents(self) -> Dict[int, float]:
        # An agent stuck in its environment holds this thread: the others stay parked meanwhile.
        return idle_agents(self._playing, self._calls)

    def _calls(self, agent_id: int) -> List[Tuple[float, float]]:
        """When each of the agent's waits began and ended (its communicators'; see :func:`idle_agents`)."""
        return [(c._parked_at, c._resumed_at) for c in self._communicators.get(agent_id, ())]

    # -- hooks of placements built on this scheduler ---------------------------------------------
    def _bind_agent(self, agent: Agent, agent_greenlet: greenlet.greenlet, hub: greenlet.greenlet) -> None:
        """Tie the agent's communicators to its greenlet and the scheduler's (in the scheduler thread,
        before the agents start)."""
        for comm in self._communicators.get(agent.id, ()):
            comm._hub, comm._greenlet = hub, agent_greenlet

    def _poll(self) -> bool:
        """Work of the scheduler's own between batches, without waiting; whether there was any. None here."""
        return False

    def _wait_for_work(self) -> None:
        """Nothing to do: sleep until a training reply, resume or stop (:meth:`_wake_scheduler`), at
        most POLL_INTERVAL."""
        with self._cond:
            if not self._replies and not self.context.stopping.is_set():
                self._cond.wait(POLL_INTERVAL)

    def _wake_scheduler(self) -> None:
        """End :meth:`_wait_for_work` (any thread)."""
        with self._cond:
            self._cond.notify()

    # -- the scheduler thread -----------------------------------------------------
    def _training_done(self, request: Request, reply: _Resume) -> None:
        """Called by a wrapper's training thread (or by stop) for each finished training request
        (``reply`` is its reply): its agent, if one is parked on it, is resumed by the scheduler."""
        with self._cond:
            reply.done = True
            if reply.greenlet is None:
                return
            self._replies.append(request)
        self._wake_scheduler()

    def _claim(self, request: Request[_Resume], agent: Optional[greenlet.greenlet]) -> bool:
        """Whether ``request`` is still in flight; if so and ``agent`` is given, the agent is to be
        resumed with its reply (and must park). A finished request's result or error is read by the caller."""
        reply = request.reply
        with self._cond:
            if reply.done:
                return False
            if agent is not None:
                reply.greenlet = agent
            return True

    def _main(self) -> None:
        pin_current_thread(self.context.agent_cpus)
        hub = greenlet.getcurrent()
        agents: List[Tuple[Agent, greenlet.greenlet]] = []
        for agent in self.context.agents:
            agent_greenlet = greenlet.greenlet(self._play, hub)
            self._bind_agent(agent, agent_greenlet, hub)
            agents.append((agent, agent_greenlet))
        self._live = len(agents)
        try:
            for agent, agent_greenlet in agents:
                if self.context.stopping.is_set():
                    break
                agent_greenlet.switch(agent)  # runs until the agent first parks (or ends)
            self._loop()
        except BaseException:  # noqa: BLE001 - a scheduler bug must still end the agents
            logger.exception("the cooperative scheduler failed; ending its agents")
        finally:
            self._end(agent_greenlet for _, agent_greenlet in agents)
            self.finished = True

    def _play(self, agent: Agent) -> None:
        self._playing[agent.id] = perf_counter()
        try:
            self.context.play(agent)
        except greenlet.GreenletExit:
            pass  # the greenlet was ended from outside
        except BaseException:  # noqa: BLE001 - play reports the agent's errors; a bug of its own ends this agent only
            logger.exception("agent %d ended by an exception outside its episodes", agent.id)
        finally:
            self._live -= 1
            del self._playing[agent.id]

    def _loop(self) -> None:
        queues = list(self._queues.values())
        stopping, cond, replies = self.context.stopping, self._cond, self._replies
        while self._live and not stopping.is_set():
            served = False
            if replies:
                with cond:
                    done = replies[:]
                    replies.clear()
                for request in done:
                    agent = request.reply.greenlet
                    if request.error is not None:
                        throw(agent, request.error)
                    else:
                        agent.switch(request.result)
                served = True
            if self._poll():
                served = True
            for queue in queues:
                if queue.pending and not queue.wrapper.paused:
                    self._predict(queue)
                    served = True
            if not served:
                self._wait_for_work()

    def _predict(self, queue: _TaskQueue) -> None:
        """One batched prediction for the parked requests of one task; resumes their agents (an
        agent that learns or ends returns here, and the batch goes on with the rest)."""
        serve(queue, self.ready, self._hot_path)

    def _end(self, agent_greenlets) -> None:
        """Unwind every agent still parked (StoppedError at its park), in this thread."""
        self.ready.clear()
        for agent_greenlet in agent_greenlets:
            if not unwind(agent_greenlet, _stopped_error, _KILL_TRIES):
                logger.error("an agent goes on parking after StoppedError; left unfinished")
        for queue in self._queues.values():
            queue.pending.clear()


def _stopped_error() -> StoppedError:
    return StoppedError("the robot was stopped while this agent waited for a reply")
