"""Self-play against frozen copies: a task that never learns, its weights refreshed from a learning task.

    self_play = SelfPlay(learner="RL", opponent="opponent", every_updates=50, snapshots=5)
    manager = parl.Manager({"RL": settings, "opponent": settings}, self_play=[self_play])

The opponent task acts like any other (its helpers send predictions, which batch as usual) but learns
nothing: its helpers must not send training data (:class:`~parl.PredictOnlyHelper`). Every
``every_updates`` optimizer steps of the learner (its ``update_steps``), :class:`OpponentSnapshots`
takes a snapshot of the learner's weights (and input statistics) and sets one snapshot of its pool
into the opponent, drawn uniformly. The pool (``pool``) is either the last ``snapshots`` taken
(``"recent"``; the newest when ``snapshots`` is 1) or a uniform sample of at most ``snapshots`` of
all those taken so far, the initial weights included (``"history"``, kept by reservoir sampling), so
early, weak players stay among the opponents as the learner grows stronger. The
snapshot is read under the learner's weights lock and set under the opponent's, so no prediction of
either task sees half-copied weights; it runs in the learner's training thread, right after the
update that made it due. The opponent starts as a copy of the learner (snapshot 0).

Where the opponent's copies act elsewhere (Ray workers), the task's
:attr:`~parl.ComputationTask.weights_replaced` count tells the broadcaster to send the new weights.

Checkpoints hold the pool: :meth:`OpponentSnapshots.write_checkpoint_file` writes every kept snapshot
and the pool's counts and random generator states (:mod:`parl.serving.pool_file`), and a resumed run
takes them up (:meth:`OpponentSnapshots.read_checkpoint_file`), so its opponents are drawn from the
same players as before the stop.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from parl.serving.checkpoint_format import CheckpointError
from parl.serving.computation_task import AlgorithmWeights, ComputationTask
from parl.serving.pool_file import read_pool_file, write_pool_file
from parl.validation import check_int

#: The values of :attr:`SelfPlay.pool`.
POOLS = ("recent", "history")


@dataclass(frozen=True)
class SelfPlay:
    """One learner and the frozen task that plays against it (a robot config's ``self_play`` block).

    Attributes:
        learner: the task that learns.
        opponent: the task that never learns; its weights are the learner's of an earlier update.
        every_updates: learner optimizer steps between two snapshots (>= 1).
        snapshots: how many snapshots the pool keeps; each refresh sets one of them, drawn
            uniformly, into the opponent.
        pool: which snapshots are kept: ``"recent"``, the last ``snapshots`` taken (1: always the
            newest); ``"history"``, a uniform sample of all taken so far (the initial weights, snapshot
            0, included), at most ``snapshots`` of them.
        seed: seeds the draws.

    Raises:
        ValueError: an empty task name, the learner named as its own opponent, ``every_updates`` or
            ``snapshots`` below 1, a ``pool`` other than ``"recent"`` or ``"history"``.
    """

    learner: str
    opponent: str
    every_updates: int = 1
    snapshots: int = 1
    pool: str = "recent"
    seed: int = 0

    def __post_init__(self) -> None:
        for key in ("learner", "opponent"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value:
                raise ValueError(f"self_play.{key}: expected a task name, got {value!r}")
        if self.learner == self.opponent:
            raise ValueError(f"self_play: task {self.learner!r} cannot snapshot itself (learner == opponent)")
        check_int("self_play.every_updates", self.every_updates, 1)
        check_int("self_play.snapshots", self.snapshots, 1)
        check_int("self_play.seed", self.seed, 0)
        if self.pool not in POOLS:
            raise ValueError(f"self_play.pool: expected one of {list(POOLS)}, got {self.pool!r}")


def check_self_play(
    plays: Sequence[SelfPlay], tasks: Sequence[str], linked_tasks: Sequence[Sequence[str]] = ()
) -> List[SelfPlay]:
    """``plays`` checked against the robot's task names and its tasks linked by shared parts.

    Raises:
        ValueError: an entry that is no :class:`SelfPlay`, an unknown task, an opponent frozen twice or
            learning elsewhere (the learner of another entry), or an opponent that shares parts with
            another task (it would learn through them).
    """
    out = []
    for index, play in enumerate(plays):
        if not isinstance(play, SelfPlay):
            raise ValueError(f"self_play[{index}]: expected a parl.SelfPlay, got {type(play).__name__}")
        for key in ("learner", "opponent"):
            name = getattr(play, key)
            if name not in tasks:
                raise ValueError(f"self_play.{key}: unknown task {name!r}; tasks are {sorted(tasks)}")
        out.append(play)
    opponents = [play.opponent for play in out]
    for play in out:
        if opponents.count(play.opponent) > 1:
            raise ValueError(f"self_play: task {play.opponent!r} is the opponent of several entries")
        if play.learner in opponents:
            raise ValueError(f"self_play: task {play.learner!r} is an opponent (it never learns), so no learner")
        for group in linked_tasks:
            if play.opponent in group:
                others = sorted(set(group) - {play.opponent})
                raise ValueError(
                    f"self_play.opponent: task {play.opponent!r} shares parts with {others}; "
                    "a frozen task must own its weights"
                )
    return out


class SnapshotPool:
    """At most ``size`` snapshots: the last ``size`` added, or (``history``) a uniform sample of all added.

    With ``history``, the ``n``-th snapshot added (``n`` > ``size``) replaces a kept one, drawn
    uniformly, with probability ``size / n`` (reservoir sampling), so every snapshot added so far is
    kept with the same probability.
    """

    def __init__(self, size: int, history: bool, seed: int) -> None:
        self.size = size
        self.history = history
        self.added = 0
        self._kept: List[AlgorithmWeights] = []
        self._rng = np.random.default_rng([seed, 1])

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, weights: AlgorithmWeights) -> None:
        """Keep ``weights`` (or, once full, perhaps not, with ``history``)."""
        self.added += 1
        if len(self._kept) < self.size:
            self._kept.append(weights)
        elif not self.history:
            self._kept = self._kept[1:] + [weights]
        else:
            slot = int(self._rng.integers(self.added))
            if slot < self.size:
                self._kept[slot] = weights

    def draw(self, rng: np.random.Generator) -> AlgorithmWeights:
        """One kept snapshot, drawn uniformly by ``rng`` (the only one without a draw)."""
        if len(self._kept) == 1:
            return self._kept[0]
        return self._kept[int(rng.integers(len(self._kept)))]

    @property
    def kept(self) -> List[AlgorithmWeights]:
        """The snapshots kept, oldest slot first."""
        return list(self._kept)

    def state(self) -> Dict[str, Any]:
        """The count added and the random generator's state (JSON values)."""
        return {"added": self.added, "rng": self._rng.bit_generator.state}

    def restore(self, state: Mapping[str, Any], kept: Sequence[AlgorithmWeights]) -> None:
        """Take up :meth:`state` and the snapshots of :attr:`kept` of a pool of the same settings.

        Raises:
            ValueError: more snapshots than ``size``, or a state that is not this pool's.
        """
        if not 1 <= len(kept) <= self.size or len(kept) > int(state["added"]):
            raise ValueError(f"{len(kept)} snapshots for a pool of {self.size} that took {state['added']}")
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        self.added, self._kept, self._rng = int(state["added"]), list(kept), rng


class OpponentSnapshots:
    """Refreshes ``opponent`` from ``learner`` every ``settings.every_updates`` of the learner's optimizer steps.

    :meth:`after_update` is the learner wrapper's update listener; :meth:`start` takes the learner's
    update count to count from (after a checkpoint was restored).

    Raises:
        ValueError: the opponent's models do not take the learner's weights (different structure or
            input normalization), found by the first copy, made here.
    """

    def __init__(self, settings: SelfPlay, learner: ComputationTask, opponent: ComputationTask) -> None:
        self.settings = settings
        self.learner = learner
        self.opponent = opponent
        #: Snapshots taken so far (the initial copy not counted).
        self.taken = 0
        self._pool = SnapshotPool(settings.snapshots, settings.pool == "history", settings.seed)
        self._rng = np.random.default_rng(settings.seed)
        self._lock = threading.Lock()
        self._next_at = settings.every_updates
        # Every model, target networks included, so that every snapshot holds every key from the first on.
        learner.build_layers(every_model=True)
        opponent.build_layers(every_model=True)
        try:
            self._take()
        except ValueError as exc:
            raise ValueError(
                f"self_play: task {opponent.name!r} cannot take the weights of task {learner.name!r}: {exc}"
            ) from None
        self.taken = 0

    def start(self) -> None:
        """Count from the learner's update steps now (restored ones included): the next snapshot
        comes ``every_updates`` steps after the last multiple of it."""
        every = self.settings.every_updates
        with self._lock:
            self._next_at = (self.learner.update_steps // every + 1) * every

    def after_update(self) -> None:
        """Take a snapshot and refresh the opponent when the learner's update steps reached the next
        multiple of ``every_updates`` (called after each of its updates, in its training thread)."""
        with self._lock:
            steps = self.learner.update_steps
            if steps < self._next_at:
                return
            every = self.settings.every_updates
            self._next_at = (steps // every + 1) * every
            self._take()

    def _take(self) -> None:
        self._pool.add(self.learner.algorithm_weights())
        self.opponent.set_algorithm_weights(self._pool.draw(self._rng))
        self.taken += 1

    def metrics(self) -> Dict[str, float]:
        """``selfplay/<opponent>/snapshots``: the snapshots taken so far in this process."""
        return {f"selfplay/{self.opponent.name}/snapshots": float(self.taken)}

    # -- checkpoints ------------------------------------------------------------------------
    def write_checkpoint_file(self, path: str) -> None:
        """Write the pool (every kept snapshot, its counts and random generator states) as file ``path``.

        Raises:
            OSError: the file could not be written.
        """
        with self._lock:
            state = {"pool": self._pool.state(), "draw_rng": self._rng.bit_generator.state}
            kept = self._pool.kept
        write_pool_file(path, state, kept)

    def read_checkpoint_file(self, path: str, sha256: Optional[str]) -> Callable[[], None]:
        """Read and verify the pool file ``path`` (of :meth:`write_checkpoint_file`) without changing
        anything; returns what takes it up (called once every file of the checkpoint is verified).

        Raises:
            CheckpointError: the file is damaged, is not a pool of these settings, or its snapshots do
                not fit the learner; one line.
        """
        state, kept = read_pool_file(path, self.learner.algorithm_weights(), self.settings.snapshots, sha256)
        try:
            probe = SnapshotPool(self.settings.snapshots, self._pool.history, self.settings.seed)
            probe.restore(state["pool"], kept)
            draw_rng = np.random.default_rng()
            draw_rng.bit_generator.state = state["draw_rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: not a pool of these self-play settings ({exc})") from None

        def take_up() -> None:
            with self._lock:
                self._pool, self._rng = probe, draw_rng

        return take_up


def make_snapshots(plays: Sequence[SelfPlay], tasks: Mapping[str, ComputationTask]) -> Dict[str, OpponentSnapshots]:
    """Opponent task name -> its :class:`OpponentSnapshots`, for ``plays`` already checked against ``tasks``."""
    return {play.opponent: OpponentSnapshots(play, tasks[play.learner], tasks[play.opponent]) for play in plays}
