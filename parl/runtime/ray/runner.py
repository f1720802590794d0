"""RayRunner: ``Manager(..., placement=RayOptions(workers=N))``: agents on Ray actors, learners here.

    manager = parl.Manager(tasks, placement=RayOptions(workers=4, address="auto"))

::

    driver (this process)                              worker actor k (RolloutWorker), on any node
    ---------------------                              ---------------------------------------------
    Manager: tasks = the learners, wrappers            a Manager of copies of the tasks; its agents
      parl-ray-<k>-take:   take(POLL_SECONDS)  <-----    play here, predictions batched by the copies
        training batches -> the learners' wrappers       training requests wait in the outbox
        episodes, errors, counters -> the Manager
      parl-ray-<k>-deliver: deliver(costs, weights) -->  newest weights applied, then the agents woken
    Broadcaster: one ray.put per broadcast               fetched once per new version
    ReplayLearner (replay_shards): samples shards <-->   ReplayShard actors <-- ShardWriters of helpers

What crosses the network: the agents once, pickled (their helpers unbound); training batches and
episode records from the workers; costs and weight references to them, and each new weights
version once per worker (fetched from the object store); with distributed replay, chunks of
transitions to the shards and sampled batches to the driver. Predictions never cross.

Weights: a task fed by time-ordered segments (on-policy helpers) broadcasts after every update,
one fed by replay samples every ``broadcast_interval`` updates (:mod:`parl.runtime.ray.broadcast`).
Each row of a segment carries the broadcast version its worker's copy acted with
(``Transition.behaviour_version``). With ``max_staleness`` set, a segment more than that many
versions older than the task's latest broadcast when an update takes it (gathered while the
learner was busy, by a worker that missed an update's window, or one started again) is dropped,
not learned: its agent's costs are empty, and :attr:`RayRunner.dropped_segments` counts it. By
default every segment is learned, as in the other placements. Segments of one synchronous update
(``min_batchsize`` = the agent count) are all of the latest version, so none is ever stale there.
With ``asynchronous``, the agents hand their segments over and go on acting
(:mod:`parl.runtime.asynchronous`), and ``async/<task>/staleness_mean``, ``_max`` and
``dropped_segments`` are among :meth:`RayRunner.metrics`.

Faults: a worker that does not answer within ``sample_timeout`` seconds, whose actor died
(``ray.kill``, a crash) or whose node was removed is reported on the ``parl`` logger by name
(``parl-ray-worker-1``), with its agents, and started again from the agents the driver sent at
the start, taking up their live ``episode`` and ``total_steps`` and the latest weights; their
experience in flight is lost, the other workers go on, and :attr:`RayRunner.losses` lists each
loss. Stopping ends every actor this runner started, and the local Ray too when this runner
started it (:mod:`parl.runtime.ray_cluster.session`).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from parl.core.errors import AgentError, StoppedError
from parl.runtime.asynchronous import hand_over_segments, staleness_metrics
from parl.runtime.error_data import error_data, rebuild_agent_error
from parl.runtime.ray.broadcast import Broadcaster
from parl.runtime.ray.options import RayOptions
from parl.runtime.ray.replay import CHUNK, SHARD_RESTARTS, ReplayLearner, ReplaySettings, ReplayShard
from parl.runtime.ray.worker import RolloutWorker
from parl.runtime.ray_cluster.session import RaySession, WorkerStartError, require_ray
from parl.runtime.runner import AgentRunner, RunnerContext
from parl.serving.computation_wrapper import ComputationWrapper, is_segment
from parl.serving.request import Callback, Request

logger = logging.getLogger("parl")

#: Seconds a worker's ``take`` waits for a training batch before answering with what it has.
POLL_SECONDS = 0.2
#: Worker actors may run this many calls at once (``take`` waits while ``deliver`` answers).
ACTOR_CONCURRENCY = 4


@dataclass
class WorkerLoss:
    """One worker lost and started again: its name, its agents, and why."""

    name: str
    agent_ids: List[int]
    reason: str


@dataclass
class _Slot:
    """The driver's side of one worker actor."""

    index: int
    name: str
    agent_ids: List[int]
    blob: bytes
    actor: Any = None  # a Ray actor handle
    generation: int = 0
    running: bool = True
    answers: List[tuple] = field(default_factory=list)
    wake: threading.Condition = field(default_factory=threading.Condition)
    pushed: Dict[str, int] = field(default_factory=dict)  # task -> version last delivered
    # Agent -> (since when it has been in its environment on the worker's clock, and on this process's).
    idle_since: Dict[int, Tuple[float, float]] = field(default_factory=dict)
    stored: Dict[str, int] = field(default_factory=dict)  # this generation's rows sent to shards
    stored_before: Dict[str, int] = field(default_factory=dict)  # earlier generations'
    threads: List[threading.Thread] = field(default_factory=list)


class RayRunner(AgentRunner):
    """Runs a Manager's agents on Ray worker actors (see the module docstring).

    Options (``context.options``): a :class:`~parl.runtime.ray.options.RayOptions`, its ``workers``
    None for the cluster's CPUs over ``worker_cpus``.
    """

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        require_ray()
        self.options: RayOptions = context.options
        self.workers = self.options.workers
        #: Workers lost and started again, in order.
        self.losses: List[WorkerLoss] = []
        self._slots: List[_Slot] = []
        self._session: Optional[RaySession] = None
        self._broadcaster: Optional[Broadcaster] = None
        self._learners: Dict[str, ReplayLearner] = {}
        self._shards: List[object] = []
        self._stopping = threading.Event()
        self._paused = False
        self._lock = threading.Lock()
        self._worker_class: Any = None  # the Ray actor class, made at start
        self._stuck: Dict[int, float] = {}  # agents stuck in their environment at stop
        self._replay_shards: Dict[str, list] = {}

    @property
    def dropped_segments(self) -> int:
        """Segments dropped, over all tasks, for being more than ``max_staleness`` broadcasts behind."""
        return sum(wrapper.staleness.dropped_segments for wrapper in self.context.wrappers.values())

    def communicator(self, wrapper: ComputationWrapper, agent_id: int):
        """The driver-side end (it gives the helpers their specs; the agents act in the workers)."""
        return wrapper.communicator(agent_id)

    # -- start -----------------------------------------------------------------------------
    def start(self) -> None:
        agents = self.context.agents
        if not agents:
            return
        options = self.options
        wanted = (self.workers or 1) * options.worker_cpus
        session = self._session = RaySession.join(options.address, wanted, options.local_cpus)
        ray = session.ray
        from ray import cloudpickle

        workers = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1) // options.worker_cpus))
        workers = min(workers, len(agents))
        tasks = {name: wrapper.task for name, wrapper in self.context.wrappers.items()}
        for task in tasks.values():
            task.build_layers()
        broadcaster = self._broadcaster = Broadcaster(ray, tasks)
        for name, wrapper in self.context.wrappers.items():
            wrapper.bound_staleness(options.max_staleness, functools.partial(broadcaster.version, name))
        if options.asynchronous:
            hand_over_segments(agents, options.segments_in_flight)
        shards = self._start_replay(ray, tasks)
        for helper in (h for agent in agents for h in agent.helpers.values()):
            helper.unbind()  # the workers bind their own; no transport or empty buffer travels
        self._worker_class = ray.remote(RolloutWorker).options(
            num_cpus=options.worker_cpus,
            resources=dict(options.worker_resources or {}),
            max_concurrency=ACTOR_CONCURRENCY,
        )
        self._replay_shards = shards
        for k in range(workers):
            ids = list(range(k, len(agents), workers))
            blob = cloudpickle.dumps((self.context.task_settings, self.context.shared, [agents[i] for i in ids]))
            slot = _Slot(k, f"parl-ray-worker-{k}", ids, blob)
            self._slots.append(slot)
            broadcaster.listen(functools.partial(self._notify, slot))
        for slot in self._slots:
            self._launch(slot)
        for slot in self._slots:
            try:
                ray.get(slot.actor.ping.remote())  # up, its agents playing
            except Exception as exc:  # noqa: BLE001 - the cause, in one line
                self.stop(time.monotonic() + 5.0)
                raise WorkerStartError(f"Ray worker {slot.name} did not start: {_cause(exc)}") from None
            for role, loop in (("take", self._take_loop), ("deliver", self._deliver_loop)):
                thread = threading.Thread(target=loop, args=(slot,), name=f"parl-ray-{slot.index}-{role}", daemon=True)
                slot.threads.append(thread)
                thread.start()
        for name, learner in self._learners.items():
            learner.start(f"parl-ray-replay-{name}")

    def _start_replay(self, ray, tasks) -> Dict[str, list]:
        """Shard actors and a learner per task whose agents all keep a replay buffer, when
        ``replay_shards`` is set; task name -> its shards."""
        count = self.options.replay_shards
        if not count:
            return {}
        agents = self.context.agents
        out: Dict[str, list] = {}
        # A lost shard is started again (empty) and its calls retried, SHARD_RESTARTS times at most.
        shard_class = ray.remote(ReplayShard).options(
            num_cpus=0, max_restarts=SHARD_RESTARTS, max_task_retries=SHARD_RESTARTS
        )
        for name, task in tasks.items():
            helpers = [h for agent in agents for key, h in agent.helpers.items() if (h.task_name or key) == name]
            settings = ReplaySettings.from_helpers(name, helpers, count)
            shards = [shard_class.remote(task.specs, settings, int(np.random.randint(2**31))) for _ in range(count)]
            self._shards.extend(shards)
            out[name] = shards
            learner = ReplayLearner(
                self.context.wrappers[name].communicator(len(agents)),
                shards,
                settings,
                stored=functools.partial(self._stored, name),
                after_update=functools.partial(self._broadcasts().after_update, name, self.options.broadcast_interval),
                on_error=functools.partial(self._replay_failed, name),
                seed=int(np.random.randint(2**31)),
            )
            self._learners[name] = learner
        return out

    def _launch(self, slot: _Slot) -> None:
        """Start (or start again) the actor of ``slot`` with the latest weights and the agents' live counters."""
        agents = self.context.agents
        counters = {i: (agents[i].episode, int(getattr(agents[i], "total_steps", -1))) for i in slot.agent_ids}
        slot.generation += 1
        slot.answers = []
        slot.pushed = {}
        for task, rows in slot.stored.items():
            slot.stored_before[task] = slot.stored_before.get(task, 0) + rows
        slot.stored = {}
        slot.actor = self._worker_class.remote(
            slot.name,
            list(sys.path),
            slot.blob,
            slot.agent_ids,
            counters,
            self.options.worker_placement,
            self._broadcasts().current(),
            self._replay_shards,
            self._limits(slot),
            int(np.random.randint(2**31)),
        )
        if self._paused:
            slot.actor.pause.remote()

    # -- the driver's two threads per worker ---------------------------------------------------
    def _take_loop(self, slot: _Slot) -> None:
        ray = self._ray()
        while not self._stopping.is_set() and slot.running:
            generation = slot.generation
            try:
                out = ray.get(slot.actor.take.remote(POLL_SECONDS), timeout=self.options.sample_timeout)
            except Exception as exc:  # noqa: BLE001 - any Ray failure loses the worker
                if self._stopping.is_set():
                    return
                self._lost(slot, exc)
                continue
            self._take_up(slot, generation, out)

    def _take_up(self, slot: _Slot, generation: int, out: Dict[str, Any]) -> None:
        context = self.context
        for record in out["episodes"]:
            context.record_episode(record)
        for agent_id, episode, described in out["errors"]:
            context.record_error(rebuild_agent_error(agent_id, episode, described))
        for agent_id, (episode, steps) in out["counters"].items():
            agent = context.agents[agent_id]
            agent.episode = episode
            if steps >= 0 and hasattr(agent, "total_steps"):
                agent.total_steps = steps
        with self._lock:  # the take threads of all workers add to the same counters
            for name, changes in out["input_changes"].items():
                context.wrappers[name].task.merge_input_changes(changes)
        self._count_served(out["served"])
        slot.stored = dict(out["stored"])
        now, before = time.perf_counter(), slot.idle_since
        # One stay in the environment keeps the driver-clock ``since`` it was first seen with (the
        # watchdog tells one stall from the next by it); a new stay gets its own.
        slot.idle_since = {
            agent_id: before[agent_id]
            if before.get(agent_id, (None,))[0] == worker_since
            else (worker_since, now - seconds)
            for agent_id, (worker_since, seconds) in out["idle"].items()
        }
        for ticket, task, agent_id, batch, _version in out["batches"]:
            self._queue(slot, generation, ticket, task, agent_id, batch)
        slot.running = bool(out["running"])

    def _count_served(self, served: Dict[str, tuple]) -> None:
        """Add the predictions a worker's copies answered (a take's or a pause's ``served``) to the
        counters of the Manager's wrappers."""
        with self._lock:  # the take threads of all workers add to the same counters
            for name, (batches, predictions, largest, timed) in served.items():
                self.context.wrappers[name].stats.add_predictions(batches, predictions, largest, timed)

    def _queue(self, slot: _Slot, generation: int, ticket: int, task: str, agent_id: int, batch) -> None:
        segment = is_segment(batch)

        def finished(result: object, error: Optional[BaseException]) -> None:
            if isinstance(error, StoppedError):
                return
            if error is None:
                self._broadcasts().after_update(task, 1 if segment else self.options.broadcast_interval)
                self._answer(slot, generation, (ticket, result, None))
            else:
                original = getattr(error, "original", error)
                text = getattr(error, "remote_traceback", None)
                self._answer(
                    slot, generation, (ticket, None, (f"training in task {task!r}", error_data(original), text))
                )

        try:
            self.context.wrappers[task].training_queue.put(Request(agent_id, batch, Callback(finished)))
        except StoppedError:
            return

    def _answer(self, slot: _Slot, generation: int, answer: tuple) -> None:
        with slot.wake:
            if generation == slot.generation:  # answers for a lost worker's requests go nowhere
                slot.answers.append(answer)
                slot.wake.notify()

    def _ray(self) -> Any:
        """The ``ray`` module of the session :meth:`start` joined."""
        session = self._session
        assert session is not None  # joined by start
        return session.ray

    def _broadcasts(self) -> Broadcaster:
        """The broadcaster :meth:`start` made."""
        broadcaster = self._broadcaster
        assert broadcaster is not None  # made by start
        return broadcaster

    def _notify(self, slot: _Slot) -> None:
        with slot.wake:
            slot.wake.notify()

    def _deliver_loop(self, slot: _Slot) -> None:
        ray = self._ray()
        while not self._stopping.is_set():
            with slot.wake:
                while not self._stopping.is_set() and not slot.answers and not self._newer_weights(slot):
                    if not slot.running and not slot.answers:
                        return
                    slot.wake.wait(POLL_SECONDS)
                answers, slot.answers = slot.answers, []
                actor, generation = slot.actor, slot.generation
            if self._stopping.is_set():
                return
            current = self._broadcasts().current()
            try:
                ray.get(actor.deliver.remote(answers, current, self._limits(slot)), timeout=self.options.sample_timeout)
            except Exception:  # noqa: BLE001 - the take thread notices the loss and starts it again
                time.sleep(POLL_SECONDS)
                continue
            if generation == slot.generation:
                slot.pushed = {name: version for name, (version, _) in current.items()}

    def _newer_weights(self, slot: _Slot) -> bool:
        current = self._broadcasts().current()
        return any(slot.pushed.get(name, -1) < version for name, (version, _) in current.items())

    def _limits(self, slot: _Slot) -> Dict[str, int]:
        """Task -> rows ``slot``'s worker may have sent to the task's shards: its agents' share of
        what the task's learner allows, and a chunk per agent (a writer sends whole chunks, and one
        waiting holds up its worker's other agents)."""
        share = len(slot.agent_ids) / len(self.context.agents)
        chunks = CHUNK * len(slot.agent_ids)
        return {name: int(-(-learner.allowed_rows() * share // 1)) + chunks for name, learner in self._learners.items()}

    def _stored(self, task: str) -> int:
        return sum(s.stored_before.get(task, 0) + s.stored.get(task, 0) for s in self._slots)

    def _lost(self, slot: _Slot, exc: BaseException) -> None:
        """Report ``slot``'s worker as lost and start it again."""
        reason = _brief(exc)
        versions = {name: version for name, (version, _) in self._broadcasts().current().items()}
        logger.error(
            "Ray worker %s (agents %s) was lost: %s; starting it again with weights versions %s",
            slot.name,
            slot.agent_ids,
            reason,
            versions,
        )
        self.losses.append(WorkerLoss(slot.name, list(slot.agent_ids), reason))  # after the line, for readers
        ray = self._ray()
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        with slot.wake:
            self._launch(slot)
            slot.wake.notify()

    def _replay_failed(self, task: str, exc: BaseException) -> None:
        self.context.record_error(AgentError(-1, 0, exc, where=f"replay learner of task {task!r}"))

    def metrics(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """``ray/<task>/replay_shard_restarts`` and ``ray/<task>/replay_rows_lost`` (so far) of each
        task with distributed replay, ``ray/worker_losses``, and, with ``asynchronous`` or
        ``max_staleness`` set, ``async/<task>/staleness_mean``, ``_max`` (segments learned since
        the last call) and ``dropped_segments`` (so far)."""
        row = {"ray/worker_losses": float(len(self.losses))}
        if self.options.asynchronous or self.options.max_staleness is not None:
            row.update(staleness_metrics(self.context.wrappers))
        for name, learner in self._learners.items():
            row[f"ray/{name}/replay_shard_restarts"] = float(learner.shard_restarts)
            row[f"ray/{name}/replay_rows_lost"] = float(learner.rows_lost)
        return [(None, row)]

    def worker_actors(self) -> Dict[str, object]:
        """Worker name -> its actor handle now (a lost worker's is replaced when it starts again)."""
        return {slot.name: slot.actor for slot in self._slots}

    def agents_of(self, name: str) -> List[int]:
        """The driver ids of worker ``name``'s agents.

        Raises:
            ValueError: no worker is called ``name``.
        """
        for slot in self._slots:
            if slot.name == name:
                return list(slot.agent_ids)
        raise ValueError(f"no worker {name!r}; workers are {[slot.name for slot in self._slots]}")

    # -- the Manager's calls ---------------------------------------------------------------
    def running(self) -> bool:
        """Whether an agent still plays, or a replay learner has updates still to make for the rows
        stored (as an agent's own helper makes its updates before its agent finishes)."""
        if self._stopping.is_set():
            return False
        return any(slot.running for slot in self._slots) or not self._learners_caught_up()

    def _learners_caught_up(self) -> bool:
        return all(learner.caught_up(self._stored(name)) or learner.failed for name, learner in self._learners.items())

    def join(self, deadline: Optional[float]) -> None:
        for slot in self._slots:
            for thread in slot.threads:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        while not self._stopping.is_set() and not self._learners_caught_up():
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def pause(self) -> None:
        """Hold every worker's agents at their next prediction (returns once they are held, with the
        predictions they made until then counted)."""
        self._paused = True
        if self._session is not None:
            for served in self._call_all("pause", timeout=self.options.sample_timeout):
                self._count_served(served)

    def resume(self) -> None:
        """Let every worker's agents go on."""
        self._paused = False
        if self._session is not None:
            self._call_all("resume", timeout=self.options.sample_timeout)

    def stop(self, deadline: float) -> List[str]:
        self._stopping.set()
        session = self._session
        if session is None:
            return []
        ray = session.ray
        for learner in self._learners.values():
            learner.stop(max(0.0, deadline - time.monotonic()))
        now = time.perf_counter()
        idle = self._idle()
        stuck = self._call_all("stop", timeout=max(0.1, deadline - time.monotonic() - 0.5), args=(0.2,))
        # Agents stuck in their environment when their worker stopped, ended with it below.
        self._stuck = {i: idle.get(i, now) for ids in stuck for i in ids}
        for actor in [slot.actor for slot in self._slots] + self._shards:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        for slot in self._slots:
            with slot.wake:
                slot.wake.notify_all()
        for thread in [t for slot in self._slots for t in slot.threads]:
            thread.join(max(0.0, deadline - time.monotonic()))
        session.leave()
        threads = [t.name for slot in self._slots for t in slot.threads if t.is_alive()]
        return threads + [f"parl-ray-replay-{name}" for name, learner in self._learners.items() if not learner.stop(0)]

    def idle_agents(self) -> Dict[int, float]:
        """Agent id -> since when it has been in its environment, as the workers last told; once
        stopped, the agents that were stuck there when their worker stopped (ended with it)."""
        if self._stopping.is_set():
            return dict(self._stuck)
        return self._idle()

    def _idle(self) -> Dict[int, float]:
        return {agent_id: since for slot in self._slots for agent_id, (_, since) in slot.idle_since.items()}

    def _call_all(self, method: str, timeout: float, args: Tuple[object, ...] = ()) -> List[Any]:
        """Call ``method`` on every worker, wait up to ``timeout`` seconds for them all, and return
        the answers that came (a lost worker's is missing: its take thread starts it again)."""
        ray = self._ray()
        refs = []
        for slot in self._slots:
            try:
                refs.append(getattr(slot.actor, method).remote(*args))
            except Exception:  # noqa: BLE001 - a lost worker
                continue
        if not refs:
            return []
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        answers = []
        for ref in done:
            try:
                answers.append(ray.get(ref))
            except Exception:  # noqa: BLE001 - a lost worker
                continue
        return answers


def _cause(exc: BaseException) -> str:
    """The error a Ray actor raised, as its last line of text (Ray wraps it in pages of context)."""
    lines = [line.strip() for line in str(getattr(exc, "cause", None) or exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _brief(exc: BaseException) -> str:
    """The first line of ``exc``, as ``Type: message``, cut to 200 characters."""
    text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return text if len(text) <= 200 else text[:197] + "..."
