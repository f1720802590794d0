"""Evaluation elsewhere: how a placement plays a run's evaluations away from the driver.

    remote_class = registry.entry(name).remote_evaluation()      # None: evaluations run in the driver
    evaluation = remote_class(MyEvaluator, argument)             # MyEvaluator(argument), built elsewhere
    returns = evaluation.play(weights, episodes=10, seed=1000, stop_below=None)
    evaluation.close()

An :class:`Evaluator` is built from one picklable argument (a run's config, say) where the
placement plays (placement "ray": an actor that asks no CPU) and plays deterministic episodes with
the weights it is handed for each evaluation; it never trains. The class that builds and plays it
there is the placement's :class:`RemoteEvaluation`, named by its registry entry.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, List, Mapping, Optional, Protocol

#: Task name -> its algorithm's weights (:meth:`~parl.ComputationTask.algorithm_weights`).
Weights = Mapping[str, Mapping[str, Mapping[str, Any]]]


class Evaluator(Protocol):
    """Plays evaluation episodes with the weights it is given."""

    def play(self, weights: Weights, episodes: int, seed: int, stop_below: Optional[float]) -> List[float]:
        """Returns of ``episodes`` deterministic episodes (seeds ``seed``, ``seed + 1``, ...) with
        ``weights``; may stop early once their mean cannot reach ``stop_below`` (None: never)."""
        ...


class RemoteEvaluation(abc.ABC):
    """An :class:`Evaluator` built and played elsewhere, for the whole of one run."""

    @abc.abstractmethod
    def __init__(self, evaluator: Callable[[object], Evaluator], argument: object) -> None:
        """Build ``evaluator(argument)`` where this placement plays evaluations."""

    @abc.abstractmethod
    def play(self, weights: Weights, episodes: int, seed: int, stop_below: Optional[float] = None) -> List[float]:
        """What the evaluator's ``play`` returns for these arguments, played there.

        Raises:
            Exception: the evaluator was lost for good (the caller evaluates elsewhere from then on).
        """

    @abc.abstractmethod
    def close(self) -> None:
        """End the evaluator (nothing when it is gone already)."""
