"""Parked predictions served in batches: the pieces every greenlet scheduler shares.

    queue = PredictionQueue(task, max_batchsize=32, predict_batch=..., prediction_error=...)
    comm = SomeParkedCommunicator(...); comm.attach(queue, ready)   # predict parks the agent's greenlet
    ...                                                             # the agents run until they park
    serve(queue, ready, HOT_PATH)      # one task.predict for the parked requests; resumes their agents

An agent's ``predict`` (:class:`Parked`) queues its sample on its task's :class:`PredictionQueue`
and switches straight to the next agent whose row is ready, or, with none left, to the scheduler
(its hub greenlet). The scheduler's :func:`serve` checks and stacks the parked samples (a sample
that breaks the specs raises its ValueError in its own agent only), predicts once, and resumes the
agents of the batch one after the other, each with its row. The cooperative placement
(:mod:`parl.runtime.cooperative.runner`) and the concurrent episodes of evaluation
(:mod:`parl.runtime.episodes`) are both built on these pieces.

A batch is what :mod:`parl.serving.prediction_batch` defines (how samples stack, how outputs split
into rows); this module reaches it faster. The per-step pieces (parking, joining the samples,
handing out the rows) run in the C extension ``parl.runtime.cooperative._cooperative`` when it was
built at install time, else as the Python twins in this module, which behave the same; both are
accelerators of that definition, tested against it. ``EXTENSION`` tells which run
(``PARL_NO_EXTENSION=1`` turns it off).
"""

from __future__ import annotations

import importlib
import os
from time import perf_counter
from types import ModuleType
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import greenlet
import numpy as np
from greenlet import getcurrent

from parl.core.communicator import Communicator
from parl.core.specs import check_dict
from parl.serving.computation_task import ComputationTask
from parl.serving.prediction_batch import BatchLayout, Row, split_replies, stack_samples
from parl.serving.stats import PredictionTimer

ArrayDict = Dict[str, np.ndarray]
#: ``predict_batch(n, inputs, states)``: the task's actions and next states for a stacked batch of ``n``.
PredictBatch = Callable[[int, ArrayDict, ArrayDict], Tuple[ArrayDict, ArrayDict]]


def _load_extension() -> Optional[ModuleType]:
    """The C extension ``parl.runtime.cooperative._cooperative``, or None when it was not built (or
    ``PARL_NO_EXTENSION`` is set to anything but ``""`` or ``"0"``)."""
    if os.environ.get("PARL_NO_EXTENSION", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("parl.runtime.cooperative._cooperative")
    except ImportError:
        return None


#: The C hot path, or None: runners made while it is None run the Python twins below.
EXTENSION = _load_extension()


class PredictionQueue:
    """The parked predictions of one task, and what a scheduler needs to serve them.

    Args:
        task: the task whose specs the parked samples are checked against.
        max_batchsize: the most requests one :func:`serve` takes.
        predict_batch: predicts a stacked batch (raises what the task raised, or ValueError for
            another number of rows than asked).
        prediction_error: the exception each agent of a failed batch gets, made from the original
            (one instance per agent).
        timer: a :class:`~parl.serving.stats.PredictionTimer` (a wrapper's) that books the latency
            the agents saw, per batch; None: not timed.
    """

    __slots__ = ("task", "timer", "pending", "max_batchsize", "predict_batch", "prediction_error", "layout", "what")

    def __init__(
        self,
        task: ComputationTask,
        *,
        max_batchsize: int,
        predict_batch: PredictBatch,
        prediction_error: Callable[[BaseException], BaseException],
        timer: Optional[PredictionTimer] = None,
    ) -> None:
        self.task = task
        self.timer = timer
        self.pending: List["Parked"] = []  # never replaced: communicators hold it
        self.max_batchsize = max_batchsize
        self.predict_batch = predict_batch
        self.prediction_error = prediction_error
        #: How the task's samples stack (its one-input case is joined by the fast paths here).
        self.layout = BatchLayout(task.specs)
        #: The input and state labels of the full check's errors.
        self.what = (f"task {task.name!r} input", f"task {task.name!r} state")


class Parked(Communicator):
    """A communicator whose ``predict`` parks the calling agent's greenlet on a
    :class:`PredictionQueue` until :func:`serve` resumes it with its row (abstract: subclasses
    give the specs, ``learn`` and :meth:`_outside_error`).

    The parked sample is checked when the batch is stacked (arrays that already fit are taken
    as they are, anything else is converted or refused) and a sample that breaks the specs raises
    its ValueError at this ``predict``, in this agent only.
    """

    def attach(self, queue: PredictionQueue, ready: List[Tuple["Parked", Row]]) -> None:
        """Park on ``queue``, and hand over to the agents of the scheduler's ``ready`` list."""
        self._pending = queue.pending
        self._ready = ready
        # Set by the scheduler: its own greenlet and the agent's.
        self._hub: greenlet.greenlet = None
        self._greenlet: greenlet.greenlet = None
        # The parked request: read by the scheduler while this agent is parked; ``_states`` is a
        # mapping, or None when the agent gave none.
        self._inputs: Mapping[str, Any] = {}
        self._states: Any = None
        # perf_counter() at the last park, and when whoever resumed it did so (latency, watchdog).
        self._parked_at = 0.0
        self._resumed_at = 0.0

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one sample; raises ValueError on data that breaks the specs."""
        if getcurrent() is not self._greenlet:
            raise self._outside_error()
        # Park: queue this communicator as the request, and hand over to the next agent whose row
        # is ready (or, with none left, to the scheduler). We are resumed with our own row. One
        # clock reading is this request's park time and the next agent's resume time.
        self._inputs = inputs
        self._states = states
        self._pending.append(self)
        self._parked_at = now = perf_counter()
        ready = self._ready
        if ready:
            following, row = ready.pop()
            following._resumed_at = now
            return following._greenlet.switch(row)
        return self._hub.switch()

    def _outside_error(self) -> Exception:
        """What ``predict`` raises when called outside the agent's greenlet."""
        raise NotImplementedError


def parked_in_c(cls: type, extension: Optional[ModuleType], name: str) -> type:
    """A subclass ``name`` of ``cls`` (a :class:`Parked` subclass) with the request fields and
    ``predict`` of ``extension`` (the C module: the same park, in C); ``cls`` itself when
    ``extension`` is None."""
    if extension is None:
        return cls
    parking = extension.Parking
    return type(name, (cls, parking), {"predict": parking.predict, "__module__": cls.__module__})


class HotPath(NamedTuple):
    """The per-batch pieces :func:`serve` runs: the extension's, or None for the Python twins."""

    join: Optional[Callable]
    hand_out: Optional[Callable]
    resumed_sum: Callable[[List["Parked"]], float]


def hot_path(extension: Optional[ModuleType]) -> HotPath:
    """The pieces of ``extension`` (the C module), or the Python twins' (None)."""
    if extension is None:
        return HotPath(None, None, _resumed_sum)
    return HotPath(extension.join, extension.hand_out, extension.resumed_sum)


def serve(queue: PredictionQueue, ready: List[Tuple[Parked, Row]], path: HotPath) -> int:
    """One batched prediction for (up to ``max_batchsize`` of) the parked requests of ``queue``;
    resumes their agents, one after the other, each with its row; returns how many were served.

    An agent resumed steps its env and, parking at its next predict, switches straight to the
    next agent of this batch (stamping its resume time); the last returns here. An agent that
    ends, or parks elsewhere, returns here too, and this loop goes on with the rest. A failed
    prediction reaches every agent of the batch as ``queue.prediction_error``.
    """
    pending = queue.pending
    if len(pending) <= queue.max_batchsize:
        batch = pending.copy()
        pending.clear()
    else:
        batch = pending[: queue.max_batchsize]
        del pending[: queue.max_batchsize]
    batch, inputs, states = _gather(queue, batch, path.join)
    n = len(batch)
    if not n:
        return 0
    try:
        actions, next_states = queue.predict_batch(n, inputs, states)
        parked = _stage(batch, actions, next_states, ready, path.hand_out)
    except Exception as exc:  # noqa: BLE001 - forwarded to every agent of the batch
        ready.clear()
        for comm in batch:
            comm._resumed_at = perf_counter()
            throw(comm._greenlet, queue.prediction_error(exc))
        return n
    while ready:
        comm, row = ready.pop()
        comm._resumed_at = perf_counter()
        comm._greenlet.switch(row)
    if queue.timer is not None:  # every agent of the batch has been resumed once: the latency they saw, summed
        queue.timer.book(n, path.resumed_sum(batch) - parked)
    return n


def unwind(agent_greenlet: greenlet.greenlet, make_error: Callable[[], BaseException], tries: int = 3) -> bool:
    """Raise ``make_error()`` in a parked agent until it ends, ``tries`` times at most; whether it ended."""
    for _ in range(tries):
        if not agent_greenlet:  # not started, or dead
            return True
        throw(agent_greenlet, make_error())
    return not agent_greenlet


def throw(agent_greenlet: greenlet.greenlet, error: BaseException) -> None:
    """Raise ``error`` in a parked agent; returns when it parks again or ends."""
    try:
        agent_greenlet.throw(error)
    except type(error):  # an agent greenlet that had not started passes the error straight back
        pass


def _stage(
    batch: List[Parked],
    actions: Mapping[str, np.ndarray],
    next_states: Mapping[str, np.ndarray],
    ready: List[Tuple[Parked, Row]],
    hand_out=None,
) -> float:
    """Queue on ``ready`` each request of ``batch`` with its reply (its row of the results, as
    :func:`~parl.serving.prediction_batch.split_replies` splits them), last first (the agents are
    resumed from its end); returns the sum of their park times. ``hand_out`` is the extension's twin
    of the split (None: split here), used for the common case, one action and no next state.

    Raises:
        ValueError: the task answered another number of rows than the batch holds.
    """
    if hand_out is not None and len(actions) == 1 and not next_states:
        ((name, values),) = actions.items()
        return hand_out(batch, name, values, ready)
    rows = split_replies(actions, next_states, len(batch))
    ready.extend(zip(reversed(batch), reversed(rows)))
    return sum([c._parked_at for c in batch])


def _resumed_sum(batch: List[Parked]) -> float:
    """The sum of the resume times of the requests of ``batch``."""
    return sum([c._resumed_at for c in batch])


def _gather(queue: PredictionQueue, batch: List[Parked], join=None) -> Tuple[List[Parked], ArrayDict, ArrayDict]:
    """The requests of ``batch`` whose samples pass the task's checks, and their samples stacked.

    Arrays of the spec's exact dtype and shape are taken as they are; anything else goes through
    the full check (:func:`~parl.core.specs.check_dict`), which converts it or names the problem:
    such an agent gets that ValueError at its ``predict`` (it may catch it and predict again) and
    leaves the batch. The values are checked on the stacked batch (floats finite: one reduction
    per float spec); a batch that fails it takes every sample through the full check, so the
    agents whose samples hold the bad values get the error and the others are served. Specs with
    a declared range always take the full check. ``join`` is the extension's (None: joined here),
    which answers None when any sample is unusual.
    """
    batch_layout = queue.layout
    stacked = _joined(batch_layout, batch, join)
    if stacked is None:
        batch = _checked(queue, batch, every=batch_layout.ranged)
        stacked = _stacked(batch_layout, batch)
        if batch_layout.ranged:  # every sample took the full check, its values included
            return (batch, *stacked)
    if batch_layout.all_finite(*stacked):
        return (batch, *stacked)
    batch = _checked(queue, batch, every=True)
    return (batch, *_stacked(batch_layout, batch))


def _joined(batch_layout: BatchLayout, batch: List[Parked], join=None) -> Optional[Tuple[ArrayDict, ArrayDict]]:
    """:func:`~parl.serving.prediction_batch.stack_samples` of the common case (one input spec of at
    least one dimension, no state, no declared range) in one pass, when every sample fits the spec
    exactly; else None. ``join`` is the extension's twin of this (None: joined here)."""
    one = batch_layout.one_input
    if one is None:
        return None
    name, shape, dtype = one
    if join is not None:
        joined = join(batch, name, shape, dtype)
        return None if joined is None else ({name: joined}, {})
    # Checked on the joined batch: a dtype other than the spec's shows in the join's dtype, and a
    # row of another shape in the join's shape or in the rows' lengths (rows of another number of
    # dimensions cannot be joined at all).
    n = len(batch)
    try:
        samples = [c._inputs for c in batch]
        values = [sample[name] for sample in samples]
        joined = np.concatenate(values)
        fitting = (
            joined.dtype is dtype
            and joined.shape == (n * shape[0],) + shape[1:]
            and len(set(map(len, values))) == 1
            and sum(map(len, samples)) == n  # no other names
            and not any([c._states for c in batch])
        )
    except Exception:  # noqa: BLE001 - anything unusual takes the full check
        return None
    return ({name: joined.reshape((n,) + shape)}, {}) if fitting else None


def _stacked(batch_layout: BatchLayout, batch: List[Parked]) -> Tuple[ArrayDict, ArrayDict]:
    """The samples of ``batch`` (each fitting the specs exactly) stacked by spec."""
    states = [c._states for c in batch] if batch_layout.states else ()
    return stack_samples(batch_layout, [c._inputs for c in batch], states)


def _checked(queue: PredictionQueue, batch: List[Parked], every: bool = False) -> List[Parked]:
    """The requests of ``batch`` whose samples pass the full check (converted in place where they
    convert); the others get the check's error (a ValueError naming the problem) thrown in and are
    left out. Samples that fit the specs exactly are taken without it unless ``every``."""
    batch_layout = queue.layout
    misfits = batch if every else [c for c in batch if not batch_layout.fits(c._inputs, c._states)]
    if not misfits:
        return batch
    specs, (what_input, what_state) = batch_layout.specs, queue.what
    refused = []
    for comm in misfits:
        try:
            comm._inputs = check_dict(specs.inputs, comm._inputs, what_input)
            comm._states = check_dict(specs.states, comm._states if comm._states is not None else {}, what_state)
        except Exception as exc:  # noqa: BLE001 - ValueError as a rule; whatever it is, it fails this agent only
            refused.append((comm, exc))
    if not refused:
        return batch
    out = {id(comm) for comm, _ in refused}
    for comm, error in refused:
        comm._resumed_at = perf_counter()
        throw(comm._greenlet, error)
    return [c for c in batch if id(c) not in out]
