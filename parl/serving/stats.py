"""WrapperStats: the cumulative counters of one ComputationWrapper, and snapshots of them.

Both loops of a wrapper keep cumulative counters here, and every placement books
the latency its agents saw through :meth:`PredictionTimer.book`; a metrics reader takes
:meth:`WrapperStats.snapshot` now and then and works with the differences
between two snapshots, so nothing is ever reset under a writer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from parl.core.costs import Costs

#: A running total: (sum of the finite values, values counted, values that were not finite).
Total = Tuple[float, int, int]


class PredictionTimer:
    """Prediction requests and the seconds their agents waited for them, as one ``(requests,
    seconds)`` tuple: the one place prediction latency is booked (:meth:`book`), by every
    placement. Each timer has one writer (an agent's thread, a scheduler, a prediction loop),
    and the tuple is replaced whole so a reader never sees one without the other."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total: Tuple[int, float] = (0, 0.0)

    def book(self, requests: int, seconds: float) -> None:
        """Add ``requests`` answered predictions that kept their agents waiting ``seconds`` in all."""
        done, waited = self.total
        self.total = (done + requests, waited + seconds)


class _TrainingTotals(NamedTuple):
    updates: int
    rows: int
    costs: Dict[str, Total]
    grad_norm: Total
    learning_rate: Optional[float]


@dataclass(frozen=True)
class StatsSnapshot:
    """Cumulative counters of one wrapper at one moment (see :meth:`WrapperStats.snapshot`).

    Attributes:
        prediction_batches: prediction batches run.
        predictions: requests in them.
        max_prediction_batch: the largest batch.
        timed_predictions: prediction requests that returned to their agent (those in ``prediction_seconds``).
        prediction_seconds: summed time from a request's put to its agent holding the result.
        training_batches: updates tried (failed ones included).
        training_requests: agents' training batches in them.
        updates: updates that succeeded (``ComputationTask.learn`` calls; one or more optimizer steps each).
        training_rows: rows in them.
        costs: scalar cost name -> :data:`Total` over the updates that returned it.
        grad_norm: :data:`Total` of the optimizer steps' global gradient norms (counted only while the
            task's ``track_grad_norm`` is set).
        learning_rate: the optimizer's learning rate after the last update (None before one).
    """

    prediction_batches: int
    predictions: int
    max_prediction_batch: int
    timed_predictions: int
    prediction_seconds: float
    training_batches: int
    training_requests: int
    updates: int
    training_rows: int
    costs: Mapping[str, Total]
    grad_norm: Total
    learning_rate: Optional[float]


class WrapperStats:
    """Cumulative counters of one wrapper, written by its threads and its communicators, read by metrics.

    Plain ints bumped by the one thread that owns each; the training side is
    replaced as one tuple per update. Nothing takes a lock.
    """

    __slots__ = (
        "prediction_batches",
        "predictions",
        "max_prediction_batch",
        "training_batches",
        "training_requests",
        "_training",
        "_timers",
        "_elsewhere",
    )

    def __init__(self) -> None:
        self.prediction_batches = 0
        self.predictions = 0
        self.max_prediction_batch = 0
        self.training_batches = 0
        self.training_requests = 0
        self._training = _TrainingTotals(0, 0, {}, (0.0, 0, 0), None)
        self._timers: List[PredictionTimer] = []
        self._elsewhere: Optional[PredictionTimer] = None  # latency of predictions answered by copies

    def mean_prediction_batch(self) -> float:
        """Average number of requests per prediction batch so far."""
        return self.predictions / self.prediction_batches if self.prediction_batches else 0.0

    def prediction_timer(self) -> PredictionTimer:
        """A new latency counter for one communicator, included in every later snapshot."""
        timer = PredictionTimer()
        self._timers.append(timer)
        return timer

    def add_predictions(self, batches: int, predictions: int, max_batch: int, timed: Tuple[int, float]) -> None:
        """Count predictions answered elsewhere, by a copy of the task (placement "ray"): ``batches``
        batches of ``predictions`` requests in all, the largest of ``max_batch``, and ``timed`` =
        (requests that returned to their agent, seconds they waited). Called by one thread at a time."""
        self.prediction_batches += batches
        self.predictions += predictions
        self.max_prediction_batch = max(self.max_prediction_batch, max_batch)
        if self._elsewhere is None:
            self._elsewhere = self.prediction_timer()
        self._elsewhere.book(timed[0], timed[1])

    def record_update(self, rows: int, costs: Costs, grad_norm: Total, learning_rate: Optional[float]) -> None:
        """Count one successful update of ``rows`` rows and add its scalar costs (per-row arrays are
        skipped); ``grad_norm`` and ``learning_rate`` are the task's at the end of the update."""
        old = self._training
        sums = dict(old.costs)
        for name, value in costs.items():
            if not isinstance(value, np.ndarray):
                total, count, nonfinite = sums.get(name, (0.0, 0, 0))
                value = float(value)
                if math.isfinite(value):
                    sums[name] = (total + value, count + 1, nonfinite)
                else:
                    sums[name] = (total, count + 1, nonfinite + 1)
        self._training = _TrainingTotals(old.updates + 1, old.rows + rows, sums, grad_norm, learning_rate)

    def snapshot(self) -> StatsSnapshot:
        """The counters now; differences between two snapshots give the rates and means of the interval.

        Each counter is read whole, but the prediction counters may be one batch
        apart from each other, a negligible skew over a metrics interval.
        """
        training = self._training
        timed = [timer.total for timer in list(self._timers)]
        return StatsSnapshot(
            prediction_batches=self.prediction_batches,
            predictions=self.predictions,
            max_prediction_batch=self.max_prediction_batch,
            timed_predictions=sum(n for n, _ in timed),
            prediction_seconds=sum(seconds for _, seconds in timed),
            training_batches=self.training_batches,
            training_requests=self.training_requests,
            updates=training.updates,
            training_rows=training.rows,
            costs=dict(training.costs),
            grad_norm=training.grad_norm,
            learning_rate=training.learning_rate,
        )
