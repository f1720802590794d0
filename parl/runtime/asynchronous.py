"""Learning without waiting for the slowest actor: what placements ``ray`` and ``processes`` share.

    options = RayOptions(asynchronous=True, segments_in_flight=2, max_staleness=4)
    hand_over_segments(agents, options.segments_in_flight)       # at start, before the agents play
    row = staleness_metrics(wrappers)                              # async/<task>/staleness_mean, ...

With ``asynchronous`` set, every on-policy helper hands its segments over
(:class:`~parl.OnPolicyHelper`'s ``max_in_flight``) and its agent goes on
acting; the learner's wrapper takes whatever segments have arrived (its
``min_batchsize`` and ``training_timeout``), and each segment carries the
weights version it was acted with, so the learner measures how far behind
each is and drops those beyond ``max_staleness`` (:mod:`parl.serving.staleness`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

from parl.core.agent import Agent
from parl.experience.helpers import OnPolicyHelper
from parl.serving.computation_wrapper import ComputationWrapper
from parl.validation import ParameterError, check_int

#: Segments each agent may have handed over and not yet learned, by default: one being learned
#: while the next is gathered.
SEGMENTS_IN_FLIGHT = 2


def check_asynchronous(asynchronous: object, segments_in_flight: object, max_staleness: object) -> None:
    """Check a placement's options of learning without waiting.

    Raises:
        ParameterError: ``asynchronous`` is not a bool, ``segments_in_flight`` not an integer in
            [1, 1000], or ``max_staleness`` not an integer >= 0 or None; the message names it.
    """
    if not isinstance(asynchronous, bool):
        raise ParameterError("asynchronous", "True or False", asynchronous)
    check_int("segments_in_flight", segments_in_flight, 1, 1_000)
    if max_staleness is not None:
        check_int("max_staleness", max_staleness, 0)


def hand_over_segments(agents: Sequence[Agent], segments_in_flight: int) -> None:
    """Let every on-policy helper of ``agents`` that waits for its updates hand its segments over
    instead, ``segments_in_flight`` at most in flight (a helper given its own ``max_in_flight`` keeps it)."""
    for agent in agents:
        for helper in agent.helpers.values():
            if isinstance(helper, OnPolicyHelper) and not helper.max_in_flight:
                helper.max_in_flight = segments_in_flight


def bound_staleness(wrappers: Mapping[str, ComputationWrapper], max_staleness: Optional[int]) -> None:
    """Drop segments more than ``max_staleness`` versions behind their task's weights at learn time
    (None: none), for every wrapper, each counting its own weights versions."""
    for wrapper in wrappers.values():
        wrapper.bound_staleness(max_staleness)


def staleness_metrics(wrappers: Mapping[str, ComputationWrapper]) -> Dict[str, float]:
    """``async/<task>/staleness_mean``, ``_max`` (of the segments learned since the last call) and
    ``dropped_segments`` (so far) of every task."""
    row: Dict[str, float] = {}
    for name, wrapper in wrappers.items():
        row.update(wrapper.staleness.metrics(name))
    return row
