"""When a training run's evaluations start, and why none did.

    start = EvaluationStart(start_return=None, start_fraction=0.3, target=-100.0)
    for episode_return in training_returns:
        start.observe(episode_return)
    start.ready(recent_mean)     # True from the first call whose recent mean reaches the threshold on

Evaluations run from the start by default (``evaluation.start_return`` and
``evaluation.start_fraction`` both null). ``start_return`` is a fixed return
the mean of the recent training returns must reach. ``start_fraction`` is
relative to the run's return range, so it works for negative returns and
follows ``train.target_return`` when that changes: the threshold is
``baseline + start_fraction * (target - baseline)``, where ``baseline`` is the
mean of the run's first :data:`BASELINE_EPISODES` training returns (about a
random policy's). Once evaluations have started they go on, whatever the
training returns do later; a resumed run applies its rule anew, with the
baseline of the run it resumes.
"""

from __future__ import annotations

import math
from typing import List, Mapping, Optional

from parl.validation import check_range

#: Training episodes whose mean return is the baseline of ``start_fraction``.
BASELINE_EPISODES = 20


class EvaluationStart:
    """The start rule of one run's evaluations (see the module docstring).

    Args:
        start_return: a fixed threshold for the recent training returns (None: none).
        start_fraction: the share, in [0, 1), of the way from the baseline to ``target`` (None: none).
        target: ``train.target_return``; required with ``start_fraction``.

    Raises:
        ValueError: both rules given, or ``start_fraction`` without a target (named).
    """

    def __init__(
        self, *, start_return: Optional[float], start_fraction: Optional[float], target: Optional[float]
    ) -> None:
        if start_return is not None and start_fraction is not None:
            raise ValueError("evaluation.start_fraction: give at most one of start_return and start_fraction")
        if start_fraction is not None:
            check_range("start_fraction", start_fraction, 0.0, 1.0)
            if target is None:
                raise ValueError(
                    "evaluation.start_fraction: needs train.target_return (it is a share of the way there)"
                )
        self.start_return = start_return
        self.start_fraction = start_fraction
        self.target = target
        self.first: List[float] = []  # the run's first training returns, up to BASELINE_EPISODES
        #: The mean of the run's first training returns, once there are :data:`BASELINE_EPISODES` of them.
        self.baseline: Optional[float] = None
        #: Whether evaluations have started (they then go on).
        self.started = start_return is None and start_fraction is None

    def observe(self, episode_return: float) -> None:
        """Count one finished training episode's return (the first ones make the baseline)."""
        if self.baseline is None:
            self.first.append(float(episode_return))
            if len(self.first) >= BASELINE_EPISODES:
                self.baseline = float(sum(self.first) / len(self.first))

    def threshold(self) -> Optional[float]:
        """The recent mean return evaluations wait for; None with no rule, or before the baseline is known."""
        if self.start_fraction is not None:
            if self.baseline is None or self.target is None:
                return None
            return self.baseline + self.start_fraction * (self.target - self.baseline)
        return self.start_return

    def ready(self, recent_mean: float) -> bool:
        """Whether evaluations may run, given the mean of the recent training returns; True from the
        first time it is on."""
        if not self.started:
            threshold = self.threshold()
            self.started = threshold is not None and not math.isnan(recent_mean) and recent_mean >= threshold
        return self.started

    def why_not(self, recent_mean: float) -> str:
        """Why evaluations have not started, in a few words (for the warning of a run that had none)."""
        if self.started:
            return "the run ended before the first one was due"
        if self.start_fraction is not None and self.baseline is None:
            return (
                f"fewer than {BASELINE_EPISODES} training episodes ended, so evaluation.start_fraction "
                "had no baseline yet"
            )
        threshold = self.threshold()
        rule = (
            f"evaluation.start_return ({self.start_return:g})"
            if self.start_fraction is None
            else f"{threshold:g} (evaluation.start_fraction {self.start_fraction:g} of the way from the first "
            f"returns' mean {self.baseline:g} to the target {self.target:g})"
        )
        return f"the mean of the recent training returns ({recent_mean:g}) never reached {rule}"

    def counters(self) -> Mapping[str, object]:
        """What a resumed run needs: the ``baseline`` (a resumed run's first returns are no longer a
        fresh policy's). Whether evaluations had started is not kept: a resumed run applies its own
        rule (possibly changed) to its own recent returns."""
        return {"evaluation_baseline": self.baseline}

    def restore(self, counters: Mapping[str, object]) -> None:
        """Take up :meth:`counters` of the run resumed (a missing baseline leaves this rule as it is)."""
        baseline = counters.get("evaluation_baseline")
        if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
            self.baseline = float(baseline)
