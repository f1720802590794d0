"""ComputationWrapper: batches many agents' requests into one ComputationTask.

Two threads per wrapper:

    prediction loop:  take every pending request (>= 1, <= max_batchsize), stack by spec,
                      task.predict, split rows back to their senders
    training loop:    wait for >= min_batchsize agents' batches (or training_timeout after the
                      first; fewer when the placement says fewer agents can send now, see
                      limit_batch_wait), take at most max_training_batchsize of them, join the time-ordered
                      segments among them (on-policy batches) into one update and learn every
                      replay sample as an update of its own, task.learn, return the costs to
                      every sender (a per-row ``td_error`` split back by sender), a segment more
                      than ``max_staleness`` weights versions behind dropped (see
                      bound_staleness and :mod:`parl.serving.staleness`); or, for a
                      wrapper made with a ``training_sink`` (a copy of a task that acts for a
                      learner elsewhere), hand every request to the sink, which answers it

An exception in the task (or a prediction answering another number of rows
than its batch holds) reaches every agent whose request was in the failed
batch, with the original traceback; the loop keeps serving later requests.

Both loops keep cumulative counters in :class:`WrapperStats`; a metrics
reader takes :meth:`WrapperStats.snapshot` now and then and works with the
differences between two snapshots, so nothing is ever reset under a writer.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from parl.affinity import pin_current_thread
from parl.core.batch import Transition, check_transition, join
from parl.core.costs import Costs
from parl.core.errors import RemoteError
from parl.moved_names import deprecated
from parl.serving.communicator import InProcessCommunicator
from parl.serving.computation_task import ComputationTask
from parl.serving.prediction_batch import BatchLayout, check_rows, split_replies, stack_samples
from parl.serving.request import Request
from parl.serving.request_queue import POLL_INTERVAL, InService, RequestQueue
from parl.serving.staleness import Staleness, segment_version
from parl.serving.stats import WrapperStats
from parl.validation import check_int, check_positive

logger = logging.getLogger("parl")

#: A take of every pending request (more than any queue holds).
_ALL_PENDING = 1 << 30


@dataclass(frozen=True)
class Batching:
    """How a wrapper batches its task's requests: the one statement of these settings, which
    :class:`~parl.TaskSettings` holds and the ``tasks.<name>.batching`` block of a robot config is made of
    (a field added here is a config key and reaches every wrapper with nothing else to change).

    Attributes:
        max_batchsize: most requests packed into one prediction batch (and, by default, training batch).
        min_batchsize: agents' training batches to wait for before an update.
        max_training_batchsize: most agents' training batches taken at once (None: max_batchsize). The
            time-ordered segments among them (on-policy helpers') are joined into one update, so this
            bounds how many env steps an on-policy update covers; replay samples are never joined (each
            is one update), so a replay helper's ``updates_per_step`` holds in every placement.
        training_timeout: seconds to wait for ``min_batchsize`` after the first training batch arrives.

    Raises:
        ValueError: a size below 1, a timeout not above 0, or ``min_batchsize`` above the batches joined
            per update.
    """

    max_batchsize: int = 256
    min_batchsize: int = 1
    max_training_batchsize: Optional[int] = None
    training_timeout: float = 0.02

    def __post_init__(self) -> None:
        check_int("max_batchsize", self.max_batchsize, 1)
        check_int("min_batchsize", self.min_batchsize, 1)
        check_positive("training_timeout", self.training_timeout)
        if self.max_training_batchsize is not None:
            check_int("max_training_batchsize", self.max_training_batchsize, 1)
        if self.min_batchsize > self.training_batchsize:
            raise ValueError(
                f"min_batchsize ({self.min_batchsize}) must not exceed the most agents' batches joined per update "
                f"({self.training_batchsize})"
            )

    @property
    def training_batchsize(self) -> int:
        """The most agents' training batches taken at once: ``max_training_batchsize`` or ``max_batchsize``."""
        return self.max_batchsize if self.max_training_batchsize is None else self.max_training_batchsize

    def with_changes(
        self,
        max_batchsize: Optional[int],
        min_batchsize: Optional[int],
        max_training_batchsize: Optional[int],
        training_timeout: Optional[float],
        owner: str,
        stacklevel: int,
    ) -> "Batching":
        """These settings with the ones given (not None) of parl 0.1's separate keyword arguments of
        ``owner``, which warns that they are deprecated; ``stacklevel`` counts from this method to the
        code that called ``owner`` (1: this method's caller)."""
        given: Dict[str, Any] = {
            "max_batchsize": max_batchsize,
            "min_batchsize": min_batchsize,
            "max_training_batchsize": max_training_batchsize,
            "training_timeout": training_timeout,
        }
        given = {key: value for key, value in given.items() if value is not None}
        if not given:
            return self
        deprecated(
            f"{owner}({', '.join(f'{key}=...' for key in given)})",
            f"{owner}(batching=Batching(...))",
            "0.2.0",
            stacklevel + 2,
        )
        return replace(self, **given)


#: Where a wrapper's training requests go instead of its task's ``learn`` (its ``training_sink``): called
#: in the training thread with the requests taken at once, each of which it answers
#: (:meth:`~parl.serving.request_queue.Request.finish`), then or later.
TrainingSink = Callable[[List[Request]], None]

#: Seconds :meth:`ComputationWrapper.stop` waits past its timeout for an update under way to end: an
#: update cannot be interrupted, and one of many minibatches (PPO's epochs over a Nature CNN) takes
#: several seconds on a busy core; only an update stuck inside the algorithm outlasts this.
UPDATE_GRACE = 300.0


class ComputationWrapper:
    """Serves one ComputationTask to all agents' communicators."""

    def __init__(
        self,
        task: ComputationTask,
        *,
        batching: Optional[Batching] = None,
        training_sink: Optional[TrainingSink] = None,
        max_batchsize: Optional[int] = None,
        min_batchsize: Optional[int] = None,
        max_training_batchsize: Optional[int] = None,
        training_timeout: Optional[float] = None,
    ) -> None:
        """Serve ``task`` with these ``batching`` settings (None: the defaults; ``max_batchsize`` and the other
        three keywords of parl 0.1 still change them, deprecated); with a
        ``training_sink``, the training thread hands it every training request as it comes instead of
        learning them here (a copy of a task acting for a learner elsewhere: a Ray worker's), and the
        batching settings of training do not apply."""
        self.task = task
        self._training_sink = training_sink
        self.batching = (Batching() if batching is None else batching).with_changes(
            max_batchsize, min_batchsize, max_training_batchsize, training_timeout, "ComputationWrapper", 2
        )
        self._layout = BatchLayout(task.specs)  # how its prediction requests stack
        self.prediction_queue = RequestQueue()
        self.training_queue = RequestQueue()
        self._predicting = InService()  # the batch the prediction loop is answering
        self._training = InService()  # the requests the training loop took and has not answered
        self.stats = WrapperStats()
        self._stop = threading.Event()
        self._serving = threading.Event()  # cleared while paused
        self._serving.set()
        self._pause = threading.Condition()  # guards _updating against pause()
        self._updating = False
        self._answered = 0  # training requests answered by the training loop (guarded by _pause)
        self._predictions_held = False  # set by drain: no more predictions, updates go on
        self._absent: Optional[Callable[[], int]] = None  # agents that cannot send now (None: none)
        self._threads: List[threading.Thread] = []
        self._update_listeners: List[Callable[[], None]] = []
        self._version_cell = np.zeros(1, np.int64)  # weights_version (share_version may move it)
        #: How far behind the weights version the segments learned were, and the bound on it.
        self.staleness = Staleness(lambda: self.weights_version)

    def add_update_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` in the training thread after each update of the task, before its senders
        are answered (a self-play opponent's refresh). Add listeners before :meth:`start`; one that
        raises fails the update's senders as the update itself would."""
        self._update_listeners.append(listener)

    @property
    def weights_version(self) -> int:
        """The version of the weights predictions use now: the updates learned here, counted from 0
        (a copy acting for a learner elsewhere: set to the version it was sent). Communicators hand it
        to helpers, which stamp it on what they store (``Transition.behaviour_version``)."""
        return int(self._version_cell[0])

    @weights_version.setter
    def weights_version(self, version: int) -> None:
        self._version_cell[0] = version

    def share_version(self, cell: np.ndarray) -> None:
        """Keep :attr:`weights_version` in ``cell`` (an int64 array of one element, in memory shared
        with worker processes, whose transports read it there) from now on, starting from its value now."""
        cell[0] = self._version_cell[0]
        self._version_cell = cell

    def bound_staleness(self, max_staleness: Optional[int], latest: Optional[Callable[[], int]] = None) -> None:
        """From now on drop each segment more than ``max_staleness`` weights versions behind
        ``latest()`` when an update takes it (None: learn every segment; its sender's costs are
        then empty, and :attr:`staleness` counts it), ``latest`` being the version the agents'
        weights are numbered against (None: :attr:`weights_version`; a learner whose agents act
        with broadcast copies numbers them by its broadcasts).

        Raises:
            ValueError: ``max_staleness`` is not an integer >= 0 or None.
        """
        self.staleness = Staleness(latest or (lambda: self.weights_version), max_staleness)

    def limit_batch_wait(self, absent: Callable[[], int]) -> None:
        """From now on an update waits for the batches of ``min_batchsize - absent()`` agents (at least
        one), ``absent`` being called again each time the training loop looks: the agents that cannot
        send now, for a placement whose agents can send only some of the time (an RLX slot's agent
        while no client plays it), so that no update waits ``training_timeout`` for batches no agent
        can send. With none absent, an update waits as in every other placement."""
        self._absent = absent

    def wanted_batches(self) -> int:
        """The agents' batches an update waits for now: ``min_batchsize``, less the agents that
        :meth:`limit_batch_wait` says cannot send (at least one)."""
        absent = self._absent
        least = self.batching.min_batchsize
        return least if absent is None else max(1, least - absent())

    def communicator(self, agent_id: int) -> InProcessCommunicator:
        """A new agent-side end for ``agent_id``."""
        return InProcessCommunicator(agent_id, self)

    def is_stopped(self) -> bool:
        """Whether :meth:`stop` has been called."""
        return self._stop.is_set()

    def start(self, prediction_cpus: Optional[Set[int]] = None, training_cpus: Optional[Set[int]] = None) -> None:
        """Start the prediction and training threads, optionally pinned to the given cores."""
        if self._threads:
            raise RuntimeError(f"wrapper of task {self.task.name!r} is already started")
        train = self._training_loop if self._training_sink is None else self._sink_loop
        loops = (("predict", self._prediction_loop, prediction_cpus), ("train", train, training_cpus))
        for name, loop, cpus in loops:
            thread = threading.Thread(
                target=_pinned, args=(loop, cpus), name=f"parl-{self.task.name}-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: Optional[float] = 5.0) -> None:
        """Stop both threads; blocked agents get StoppedError at once (those whose request is
        inside the task too). Returns once the threads have ended, or after ``timeout`` seconds;
        an update under way is waited for up to :data:`UPDATE_GRACE` seconds more, so that the
        task is left whole and can be saved."""
        self._stop.set()
        self.prediction_queue.close()
        self.training_queue.close()
        self._predicting.cancel()
        self._training.cancel()
        for thread in self._threads:
            thread.join(timeout)
        if self.alive:
            self._finish_update(UPDATE_GRACE)

    def hold_predictions(self) -> None:
        """Serve no more predictions while updates go on: agents wait at their next prediction
        (what :meth:`drain` and ``Manager.drain`` do first, so no agent steps past the end). For a
        wrapper about to stop: nothing undoes it."""
        self._predictions_held = True
        self.prediction_queue.hold()

    def drain(self, timeout: float) -> bool:
        """Learn the training requests sent so far before the robot stops: predictions are held
        (:meth:`hold_predictions`), updates wait for no more agents than have sent theirs
        (``min_batchsize`` and ``training_timeout`` no longer hold), and this returns once every
        request queued before it returns is answered, or after ``timeout`` seconds. What agents
        send meanwhile (they finish the step they are in) is learned too; what comes after this
        returns is failed by :meth:`stop`. True when drained; False on timeout, or at once when
        paused or stopped (nothing is learned then)."""
        check_positive("timeout", timeout)
        self.hold_predictions()
        self.training_queue.flush()
        deadline = time.monotonic() + timeout
        with self._pause:
            while self._answered < self.training_queue.puts:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set() or not self._serving.is_set() or not self.alive:
                    return False
                self._pause.wait(min(left, POLL_INTERVAL))
        return True

    def _finish_update(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for an update under way to end, then for the threads (they end
        as soon as no call of the task holds them)."""
        deadline = time.monotonic() + grace
        with self._pause:
            if self._updating:
                logger.info("task %r: waiting for the update under way to end before stopping", self.task.name)
            while self._updating and deadline > time.monotonic():
                self._pause.wait(deadline - time.monotonic())
        for thread in self._threads:
            thread.join(POLL_INTERVAL * 10)

    def pause(self) -> None:
        """Serve no more predictions or updates until :meth:`resume`: agents wait in ``predict``
        and ``learn``. Returns once an update under way has finished, so the weights stay as they
        are until :meth:`resume` (a prediction under way may still finish)."""
        with self._pause:
            self._serving.clear()
            while self._updating:
                self._pause.wait()

    def resume(self) -> None:
        """Serve predictions and updates again after :meth:`pause`."""
        with self._pause:
            self._serving.set()
            self._pause.notify_all()

    @property
    def paused(self) -> bool:
        """Whether predictions are paused (by :meth:`pause`, or held by :meth:`drain`)."""
        return self._predictions_held or not self._serving.is_set()

    @property
    def alive(self) -> bool:
        """Whether either thread is still running."""
        return any(t.is_alive() for t in self._threads)

    # -- the one way to the task's predict ---------------------------------
    def predict_batch(
        self, n: int, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray]
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
        """One batched prediction of ``n`` requests, counted in :attr:`stats`: what every placement
        calls, whether the batch was gathered by this wrapper's prediction thread or by another
        scheduler (the cooperative runner's). Callers hand a failure to each sender as
        :meth:`prediction_error`.

        Raises:
            Exception: whatever the task raised.
            ValueError: the task answered another number of rows than ``n``.
        """
        stats = self.stats
        stats.prediction_batches += 1
        stats.predictions += n
        if n > stats.max_prediction_batch:
            stats.max_prediction_batch = n
        actions, next_states = self.task.predict(inputs, states)
        check_rows(actions, next_states, n)
        return actions, next_states

    def prediction_error(self, original: BaseException) -> RemoteError:
        """The error one sender of a failed prediction batch gets (one instance per sender: an instance
        raised in several threads would collect every thread's frames in its traceback)."""
        return RemoteError(f"prediction in task {self.task.name!r}", original)

    # -- loops --------------------------------------------------------------
    def _prediction_loop(self) -> None:
        batch_layout, queue = self._layout, self.prediction_queue
        while not self._stop.is_set():
            if not self._serving.wait(POLL_INTERVAL):
                continue
            if self._predictions_held:
                self._stop.wait(POLL_INTERVAL)
                continue
            requests = queue.take(1, self.batching.max_batchsize, None)
            if not requests or not self._predicting.hold(requests):
                continue
            n = len(requests)
            try:
                payloads = [r.payload for r in requests]  # (inputs, states), checked by each sender's transport
                inputs, states = stack_samples(batch_layout, [p[0] for p in payloads], [p[1] for p in payloads])
                actions, next_states = self.predict_batch(n, inputs, states)
                replies = split_replies(actions, next_states, n)
            except Exception as exc:  # noqa: BLE001 - forwarded to every sender
                for request in self._predicting.take_back(n) or ():
                    request.finish(error=self.prediction_error(exc))
                continue
            if self._predicting.take_back(n) is None:
                continue  # stopped meanwhile: the senders have their StoppedError
            for request, reply in zip(requests, replies):
                request.finish(reply)

    def _training_loop(self) -> None:
        queue = self.training_queue
        while not self._stop.is_set():
            batching = self.batching
            requests = queue.take(self.wanted_batches, batching.training_batchsize, batching.training_timeout)
            groups = _update_groups(requests)
            if not self._training.hold([r for group in groups for r in group]):
                continue
            for group in groups:
                if not self._begin_update():
                    break  # stopped while paused: stop fails the held requests
                try:
                    self._update(group)
                finally:
                    with self._pause:
                        self._updating = False
                        self._answered += len(group)
                        self._pause.notify_all()

    def _sink_loop(self) -> None:
        """The training loop of a wrapper with a training sink: every pending request handed over."""
        queue, sink = self.training_queue, self._training_sink
        assert sink is not None  # start runs this loop only for a wrapper with a sink
        while not self._stop.is_set():
            requests = queue.take(1, _ALL_PENDING, None)
            if requests:
                sink(requests)

    def _begin_update(self) -> bool:
        """Wait while paused; False when the wrapper stops meanwhile."""
        with self._pause:
            while not self._serving.is_set():
                if self._stop.is_set():
                    return False
                self._pause.wait(POLL_INTERVAL)
            self._updating = True
            return True

    def _update(self, requests: List[Request]) -> None:
        task, stats = self.task, self.stats
        learned, stale = self._within_bound(requests)
        if not learned:
            if self._training.take_back(len(requests)) is not None:
                for request in stale:
                    request.finish({})
            return
        stats.training_batches += 1
        stats.training_requests += len(learned)
        try:
            # Each agent's batch is checked here, once, where it enters the task (the task does not
            # check the joined batch again): a batch that is no Transition fails its sender alone.
            batches = [check_transition(r.payload, f"agent {r.agent_id}'s training batch") for r in learned]
            sizes = [b.batch_size for b in batches]
            costs = task.learn_checked(_join_batches(batches))
            replies = _split_costs(costs, sizes)
            for listener in self._update_listeners:
                listener()
        except Exception as exc:  # noqa: BLE001 - forwarded to every sender
            if self._training.take_back(len(requests)) is not None:
                for request in requests:
                    if any(request is r for r in stale):
                        request.finish({})
                    else:
                        _fail([request], f"training in task {task.name!r}", exc)
            return
        self._version_cell[0] += 1
        stats.record_update(sum(sizes), costs, task.grad_norm_total, task.learning_rate())
        if self._training.take_back(len(requests)) is None:
            return  # stopped meanwhile: the senders have their StoppedError
        answers = {id(request): reply for request, reply in zip(learned, replies)}
        for request in requests:  # in the order sent (a transport may answer one agent's in one stream)
            request.finish(answers.get(id(request), {}))  # {}: dropped as stale, learned by no update

    def _within_bound(self, requests: List[Request]) -> Tuple[List[Request], List[Request]]:
        """``requests`` as (those to learn, the segments dropped for being more than ``max_staleness``
        versions behind), measuring the staleness of the segments that carry their weights version."""
        versions = [
            segment_version(getattr(r.payload, "behaviour_version", None)) if is_segment(r.payload) else None
            for r in requests
        ]
        if all(v is None for v in versions):
            return requests, []
        return self.staleness.split(requests, versions)


def _update_groups(requests: List[Request]) -> List[List[Request]]:
    """The updates to run for ``requests``: the time-ordered segments (batches whose
    ``sequence_lengths`` is set, as on-policy helpers send) joined into one, every other batch (a
    replay sample) an update of its own, so a replay helper's update-to-data ratio does not depend
    on which agents' batches happen to arrive together. (A payload that is no Transition is an
    update of its own, which fails for its sender alone.)"""
    segments = [r for r in requests if is_segment(r.payload)]
    samples = [[r] for r in requests if not is_segment(r.payload)]
    return samples + [segments] if segments else samples


def is_segment(batch: object) -> bool:
    """Whether ``batch`` is a time-ordered segment (an on-policy helper's: ``sequence_lengths`` set),
    which updates join, rather than a replay sample, learned alone."""
    return getattr(batch, "sequence_lengths", None) is not None


def _join_batches(batches: List[Transition[np.ndarray]]) -> Transition[np.ndarray]:
    """One batch of the rows of ``batches`` in order; a row-structure field that some batches leave
    None takes its default on their rows (their own segments of one row, one env step, weight 1)."""
    if len(batches) == 1:
        return batches[0]

    def column(field: str, default: float) -> Optional[np.ndarray]:
        parts = [getattr(b, field) for b in batches]
        if all(p is None for p in parts):
            return None
        return np.concatenate(
            [np.full((b.batch_size, 1), default, np.float32) if p is None else p for b, p in zip(batches, parts)]
        )

    lengths: Optional[Tuple[int, ...]] = None
    if any(b.sequence_lengths is not None for b in batches):
        lengths = ()
        for b in batches:
            lengths += (1,) * b.batch_size if b.sequence_lengths is None else tuple(b.sequence_lengths)
    versions = [b.behaviour_version for b in batches if b.behaviour_version is not None]
    return join(
        batches,
        np.concatenate,
        sequence_lengths=lengths,
        bootstrap_steps=column("bootstrap_steps", 1.0),
        weights=column("weights", 1.0),
        behaviour_version=np.concatenate(versions) if len(versions) == len(batches) else None,
    )


def _split_costs(costs: Costs, sizes: List[int]) -> List[Costs]:
    """Each sender's costs: the shared scalars, and its own rows of per-row values."""
    per_row = [k for k, v in costs.items() if isinstance(v, np.ndarray)]
    if not per_row or len(sizes) == 1:
        return [costs] * len(sizes)
    bounds = np.cumsum(sizes)[:-1]
    pieces = {k: np.split(costs[k], bounds) for k in per_row}
    return [{**costs, **{k: pieces[k][i] for k in per_row}} for i in range(len(sizes))]


def _pinned(loop: Callable[[], None], cpus: Optional[Set[int]]) -> None:
    pin_current_thread(cpus)
    loop()


def _fail(requests: List[Request], where: str, original: BaseException) -> None:
    # One RemoteError per sender: an exception instance raised in several
    # threads would collect every thread's frames in its traceback.
    for request in requests:
        request.finish(error=RemoteError(where, original))
