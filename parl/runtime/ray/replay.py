"""Distributed replay: replay shards as Ray actors, written by the workers, sampled by the learner.

    shards = [ray.remote(ReplayShard).remote(task.specs, settings, seed) for _ in range(n)]
    helper.store_only(ShardWriter("RL", shards, first=3))        # in a worker: transitions go to the shards
    learner = ReplayLearner(communicator, shards, settings, ...)  # on the driver: sample, learn, re-prioritize

With ``replay_shards: N`` every agent's :class:`~parl.ExpReplayHelper` of a task keeps no buffer of
its own: it sends the transitions it would have stored (n-step sums already made, so the stored
rows are exactly the helper's) to the shards, in chunks of :data:`CHUNK` rows or at an episode's
end, and never sends a batch. On the driver a :class:`ReplayLearner` per task draws batches from
the shards at the helpers' update-to-data ratio over all agents' stored steps, learns each
through the task's wrapper (an update of its own, as every replay sample), and, with prioritized
replay, sends the rows' new priorities (the update's ``td_error``) back to the shard they came
from.

What is transformed where (the rule that keeps stored and sampled data consistent): the shards
hold what the agents stored, raw; n-step sums are made before storage with the helper's
``gamma``, and every other transform (input normalization, reward scale and clip) is applied by
the learning task after sampling, so a transition is transformed once, with the statistics of
the update that learns it, however often it is replayed.

Sampling: each batch comes from one shard, chosen with probability proportional to its size
(uniform over all stored rows for uniform replay); prioritized shards draw by priority within
the shard and weight by the shard's own priorities (as Ape-X's shards). Capacity: the helpers'
``capacity`` times the number of agents, split evenly across the shards (the memory of per-agent
buffers); beta anneals over the same share of ``beta_steps``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from operator import itemgetter
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    cast,
    runtime_checkable,
)

import numpy as np

from parl.core.batch import Transition, join
from parl.core.communicator import Communicator
from parl.core.errors import StoppedError
from parl.core.task_specs import TaskSpecs
from parl.experience.frame_store import FrameStoreSetting
from parl.experience.n_step import copy_transition
from parl.experience.prioritized_replay_buffer import PrioritizedReplayBuffer, ReplayBufferSettings, replay_buffer_for

logger = logging.getLogger("parl")

#: A sampled batch and the slots of its rows (prioritized replay; None for uniform replay).
Sampled = Tuple[Transition[np.ndarray], Optional[np.ndarray]]

#: Rows a writer gathers before sending them to a shard (also sent at every episode's end).
CHUNK = 64
#: Chunks of one writer on their way to shards, at most (a further one waits for the oldest).
MAX_CHUNKS_IN_FLIGHT = 4
#: Batches the learner asks a shard for in one call, and calls it keeps on their way.
BATCHES_PER_CALL = 8
CALLS_IN_FLIGHT = 2
#: Updates the workers may store rows for beyond those learned (their lead over the learner).
AHEAD_UPDATES = 64
#: Times Ray starts a lost shard again (empty: its rows are lost, counted by the learner), and
#: retries a call of it meanwhile; a shard lost more often ends the run.
SHARD_RESTARTS = 3


#: What a distributed replay reads of each helper of a task: the settings of the replay it keeps
#: (attributes of these names, as :class:`~parl.ExpReplayHelper` has them).
REPLAY_KNOBS = (
    "capacity",
    "batch_size",
    "warmup_steps",
    "updates_per_step",
    "prioritized",
    "alpha",
    "beta_start",
    "beta_steps",
    "priority_epsilon",
    "n_step",
    "gamma",
    "frame_store",
)


@runtime_checkable
class ReplayHelper(Protocol):
    """A helper that keeps a replay (:class:`~parl.ExpReplayHelper` is one): it has the attributes of
    :data:`REPLAY_KNOBS`, and :meth:`store_only` sends what it would store to the shards instead."""

    def store_only(self, writer: "ShardWriter") -> None:
        """Hand every transition to ``writer`` from now on, after the n-step sums, and send no batches."""


def is_replay_helper(helper: object) -> bool:
    """Whether ``helper`` is a :class:`ReplayHelper` with every attribute of :data:`REPLAY_KNOBS`."""
    return isinstance(helper, ReplayHelper) and all(hasattr(helper, knob) for knob in REPLAY_KNOBS)


@dataclass(frozen=True)
class ReplaySettings:
    """A distributed replay of one task, read from its agents' :class:`~parl.ExpReplayHelper` s."""

    capacity: int
    batch_size: int
    warmup_steps: int
    updates_per_step: float
    prioritized: bool
    alpha: float
    beta_start: float
    beta_steps: int
    priority_epsilon: float
    bootstrap_steps: bool
    frame_store: FrameStoreSetting

    @classmethod
    def from_helpers(cls, task: str, helpers: Sequence[object], shards: int) -> "ReplaySettings":
        """The settings for ``shards`` shards serving ``helpers`` (one per agent), which must all be
        :class:`ReplayHelper` s (ExpReplayHelpers) with the same settings.

        Raises:
            ValueError: a helper keeps no replay (is no ReplayHelper), or two helpers differ.
        """
        if not helpers or not all(is_replay_helper(h) for h in helpers):
            kinds = sorted({type(h).__name__ for h in helpers})
            raise ValueError(f"replay_shards: task {task!r} needs ExpReplayHelpers on every agent, got {kinds}")
        per_agent = [_helper_settings(h) for h in helpers]
        if any(s != per_agent[0] for s in per_agent):
            raise ValueError(f"replay_shards: the agents' ExpReplayHelpers of task {task!r} have different settings")
        knobs = dict(zip(REPLAY_KNOBS, per_agent[0]))  # what every helper has alike
        agents_per_shard = len(helpers) / shards
        return cls(
            capacity=max(1, int(knobs["capacity"] * agents_per_shard)),
            batch_size=knobs["batch_size"],
            warmup_steps=knobs["warmup_steps"] * len(helpers),
            updates_per_step=knobs["updates_per_step"],
            prioritized=knobs["prioritized"],
            alpha=knobs["alpha"],
            beta_start=knobs["beta_start"],
            beta_steps=int(knobs["beta_steps"] * agents_per_shard),
            priority_epsilon=knobs["priority_epsilon"],
            bootstrap_steps=knobs["n_step"] > 1,
            frame_store=knobs["frame_store"],
        )


def _helper_settings(helper: object) -> Tuple[Any, ...]:
    return tuple(getattr(helper, knob) for knob in REPLAY_KNOBS)


class ReplayShard:
    """One shard (made a Ray actor by the runner): a replay buffer of the task's specs."""

    def __init__(self, specs: TaskSpecs, settings: ReplaySettings, seed: int) -> None:
        # Read only: its frozen fields stand for the protocol's attributes.
        buffer_settings = cast(ReplayBufferSettings, settings)
        self.buffer = replay_buffer_for(buffer_settings, specs, bootstrap_steps=settings.bootstrap_steps)
        self.prioritized = settings.prioritized
        self._rng = np.random.default_rng(seed)
        self.added = 0
        #: Tells this shard from one Ray started again in its place (with the same arguments, empty).
        self.instance = os.urandom(8).hex()

    def add(self, rows: Transition[np.ndarray]) -> int:
        """Store every row of ``rows`` (a batch); returns the rows stored in all."""
        for i in range(rows.batch_size):
            self.buffer.add(rows.map_arrays(itemgetter(i)))  # row i, as views
        self.added += rows.batch_size
        return self.added

    def sample(
        self, batch_size: int, count: int
    ) -> Tuple[List[Tuple[Transition[np.ndarray], Optional[np.ndarray]]], int, str]:
        """``count`` batches, each with the slots of its rows when prioritized (for
        :meth:`update_priorities`; else None), the rows held now (no batch when it holds none), and
        :attr:`instance`."""
        size = len(self.buffer)
        if size == 0:
            return [], 0, self.instance
        buffer = self.buffer
        if isinstance(buffer, PrioritizedReplayBuffer):
            return [buffer.sample(batch_size, self._rng) for _ in range(count)], size, self.instance
        return [(buffer.sample(batch_size, self._rng), None) for _ in range(count)], size, self.instance

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """Priorities ``|td_error| + epsilon`` for the rows in ``slots``."""
        assert isinstance(self.buffer, PrioritizedReplayBuffer)  # slots come from a prioritized sample only
        self.buffer.update_priorities(slots, td_errors)


class Allowance:
    """The rows a worker may send to each task's shards so far, as its share of what the learner can
    learn from at the helpers' update-to-data ratio: writers wait here when they are ahead, so
    the agents act no faster than the learner learns (the driver raises the limits as it learns)."""

    def __init__(self, limits: Mapping[str, int]) -> None:
        self._cond = threading.Condition()
        self._limits = dict(limits)
        self._closed = False
        #: Rows sent so far, by task.
        self.sent: Dict[str, int] = {task: 0 for task in limits}

    def raise_to(self, limits: Mapping[str, int]) -> None:
        """New limits (a limit never goes down)."""
        with self._cond:
            for task, limit in limits.items():
                self._limits[task] = max(self._limits.get(task, 0), limit)
            self._cond.notify_all()

    def take(self, task: str, rows: int) -> None:
        """Count ``rows`` more sent to ``task``'s shards, first waiting while that would pass the limit."""
        with self._cond:
            while not self._closed and self.sent[task] + rows > self._limits[task]:
                self._cond.wait(0.1)
            self.sent[task] += rows

    def close(self) -> None:
        """Wait no more (the worker stops)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class ShardWriter:
    """A helper's way to the shards of its task (see :meth:`~parl.ExpReplayHelper.store_only`):
    gathers transitions and sends each chunk to the next shard in turn, starting at ``first``,
    within the worker's ``allowance``."""

    def __init__(self, task: str, shards: Sequence[Any], first: int, allowance: Allowance) -> None:
        self.task = task
        self._shards = list(shards)
        self._next = first % len(self._shards)
        self._allowance = allowance
        self._rows: List[Transition[np.ndarray]] = []
        self._in_flight: List[Any] = []  # Ray object refs

    def add(self, transition: Transition[np.ndarray]) -> None:
        """Keep a copy of ``transition``; send a chunk once :data:`CHUNK` rows are kept."""
        self._rows.append(copy_transition(transition))
        if len(self._rows) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """Send the rows kept (to the next shard), waiting for the oldest chunk in flight beyond
        :data:`MAX_CHUNKS_IN_FLIGHT`."""
        if not self._rows:
            return
        import ray

        rows, self._rows = self._rows, []
        self._allowance.take(self.task, len(rows))
        batch = join(rows, np.stack, bootstrap_steps=_stacked_steps(rows))
        shard = self._shards[self._next]
        self._next = (self._next + 1) % len(self._shards)
        self._in_flight.append(shard.add.remote(batch))
        if len(self._in_flight) > MAX_CHUNKS_IN_FLIGHT:
            ray.get(self._in_flight.pop(0))


def _stacked_steps(rows: List[Transition[np.ndarray]]) -> Optional[np.ndarray]:
    if rows[0].bootstrap_steps is None:
        return None
    return np.stack([np.asarray(r.bootstrap_steps, np.float32).reshape(1) for r in rows])


class ReplayLearner:
    """The driver's side of one task's distributed replay: a thread that samples the shards and
    learns at the helpers' update-to-data ratio (see the module docstring).

    Batches are fetched :data:`BATCHES_PER_CALL` per call, with :data:`CALLS_IN_FLIGHT` calls on
    their way while the task learns, so the learner waits on the network as little as it can.

    Args:
        communicator: the driver's end of the task's wrapper (each batch is learned through it).
        shards: the task's shard actors.
        settings: the replay settings.
        stored: returns the rows the workers have sent to the shards so far, all workers together.
        after_update: called after each update (the weight broadcast).
        on_error: called with an update's error (a RemoteError); the learner stops then.
        seed: seeds the choice of shards.
    """

    def __init__(
        self,
        communicator: Communicator,
        shards: Sequence[Any],
        settings: ReplaySettings,
        *,
        stored: Callable[[], int],
        after_update: Callable[[], object],
        on_error: Callable[[BaseException], None],
        seed: int,
    ) -> None:
        self._comm = communicator
        self._shards = list(shards)
        self.settings = settings
        self._stored = stored
        self._after_update = after_update
        self._on_error = on_error
        self._ratio = Fraction(settings.updates_per_step).limit_denominator(1_000_000)
        self._rng = np.random.default_rng(seed)
        self._stop = threading.Event()
        self._sizes = np.ones(len(self._shards))  # rows per shard, as last seen (equal at first)
        self._seen = np.zeros(len(self._shards))  # rows per shard as last answered (0 before any answer)
        self._instances: List[Optional[str]] = [None] * len(self._shards)  # each shard's, as last answered
        #: Updates learned so far.
        self.updates = 0
        #: Shards found started again (empty) since the learner started, and the rows they had held.
        self.shard_restarts = 0
        self.rows_lost = 0
        #: Whether an update failed (the learner has stopped).
        self.failed = False
        self._thread: Optional[threading.Thread] = None

    def start(self, name: str) -> None:
        """Start the learning thread (``name``: its thread name)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Stop the thread; whether it ended within ``timeout`` seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def earned(self, stored: int) -> int:
        """Updates earned by ``stored`` rows: ``ceil((stored - warmup + 1) * updates_per_step)`` once
        ``warmup_steps`` rows are stored, as an ExpReplayHelper counts (0 before)."""
        ready = stored - max(self.settings.warmup_steps, 1) + 1
        if ready <= 0:
            return 0
        return -(-ready * self._ratio.numerator // self._ratio.denominator)

    def caught_up(self, stored: int) -> bool:
        """Whether every update ``stored`` rows earn has been made."""
        return self.updates >= self.earned(stored)

    def allowed_rows(self) -> int:
        """Rows the workers may have stored so far: the warm-up and the rows that earn the updates
        learned and :data:`AHEAD_UPDATES` more."""
        ahead = self.updates + AHEAD_UPDATES
        return max(self.settings.warmup_steps, 1) - 1 + -(-ahead * self._ratio.denominator // self._ratio.numerator)

    def _run(self) -> None:
        import ray

        pending: Deque[Tuple[int, Any, int]] = deque()  # (shard, reply, batches asked for)
        asked = 0  # batches asked for and not yet learned
        try:
            while not self._stop.is_set():
                due = self.earned(self._stored()) - self.updates - asked
                while due > 0 and len(pending) < CALLS_IN_FLIGHT:
                    count = min(due, BATCHES_PER_CALL)
                    index = int(self._rng.choice(len(self._shards), p=self._sizes / self._sizes.sum()))
                    pending.append((index, self._shards[index].sample.remote(self.settings.batch_size, count), count))
                    asked += count
                    due -= count
                if not pending:
                    self._stop.wait(0.002)
                    continue
                index, reply, count = pending.popleft()
                asked -= count
                batches, size, instance = ray.get(reply)
                self._note_size(index, size, instance)
                for batch, slots in batches:
                    if self._stop.is_set():
                        return
                    self._learn(index, batch, slots)
        except StoppedError:
            return
        except Exception as exc:  # noqa: BLE001 - reported to the runner, which fails the run
            self.failed = True
            self._on_error(exc)

    def _note_size(self, index: int, size: int, instance: str) -> None:
        """Take shard ``index``'s size as it answered; a shard of another instance than before was
        started again by Ray after it was lost: the rows it held when it last answered are counted
        lost (at least those; it may have taken more before it was lost)."""
        if self._instances[index] not in (None, instance):
            self.shard_restarts += 1
            self.rows_lost += int(self._seen[index])
            logger.warning(
                "replay shard %d of the learner was lost and started again: %d rows lost",
                index,
                int(self._seen[index]),
            )
        self._seen[index], self._instances[index] = size, instance
        # An empty shard is still asked now and then (1 % of the weight of a row), so its rows are
        # found once writers fill it again.
        self._sizes[index] = max(size, 0.01)

    def _learn(self, index: int, batch: Transition[np.ndarray], slots: Optional[np.ndarray]) -> None:
        costs = self._comm.learn(batch)  # read-only arrays from Ray's store: the task only reads them
        self.updates += 1
        if slots is not None and costs.get("td_error") is not None:
            self._shards[index].update_priorities.remote(slots, np.asarray(costs["td_error"]).reshape(-1))
        self._after_update()
