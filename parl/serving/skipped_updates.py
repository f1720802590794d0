"""SkippedUpdates: a task's count of the updates it skipped for a non-finite loss or gradient.

    skips = SkippedUpdates("RL", max_in_a_row=100)
    if finite: step(); skips.passed()
    else: skips.skipped("loss nan")     # warns now and then; raises at the 100th in a row

An update whose loss or gradient holds a NaN or an infinity would write it into
every weight it touches; :class:`~parl.serving.computation_task.ComputationTask`
skips it instead (no optimizer step) and counts it here. One skipped update is
survivable (a rare overflow); many in a row mean the run has diverged, and the
last of ``max_in_a_row`` raises :class:`NonFiniteUpdatesError`, which fails the
agents that sent the batch and so stops the run with its weights still finite.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from parl.validation import check_int, check_positive

logger = logging.getLogger("parl")

#: Skipped updates in a row that stop a run, unless the task says otherwise.
DEFAULT_MAX_SKIPPED_UPDATES = 100
#: Seconds between two warnings about skipped updates of one task.
WARNING_INTERVAL = 60.0


class NonFiniteUpdatesError(RuntimeError):
    """Raised by a task once ``max_skipped_updates`` updates in a row had a non-finite loss or gradient."""


class SkippedUpdates:
    """Counts skipped updates (in all and in a row), warns at the first and then at most once every
    ``warning_interval`` seconds, and raises once ``max_in_a_row`` updates in a row were skipped.

    Args:
        task: the task's name, for messages.
        max_in_a_row: skipped updates in a row that raise (an int >= 1).
        warning_interval: seconds between warnings.
        clock: seconds on a monotonic clock (tests pass a fake).
    """

    def __init__(
        self,
        task: str,
        max_in_a_row: int = DEFAULT_MAX_SKIPPED_UPDATES,
        *,
        warning_interval: float = WARNING_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task = task
        self.max_in_a_row = check_int("max_skipped_updates", max_in_a_row, 1)
        self.warning_interval = check_positive("warning_interval", warning_interval)
        self._clock = clock
        self._warned_at: Optional[float] = None
        #: Updates skipped since the task was made.
        self.total = 0
        #: Updates skipped since the last one applied.
        self.in_a_row = 0

    def passed(self) -> None:
        """An update was applied: the run of skipped ones ends."""
        self.in_a_row = 0

    def skipped(self, what: str) -> None:
        """Count one skipped update; ``what`` says what was not finite (``"loss nan"``, ``"gradient"``).

        Raises:
            NonFiniteUpdatesError: this is the ``max_in_a_row``-th skipped update in a row.
        """
        self.total += 1
        self.in_a_row += 1
        if self.in_a_row >= self.max_in_a_row:
            raise NonFiniteUpdatesError(
                f"task {self.task!r}: {self.in_a_row} updates in a row had a non-finite loss or gradient "
                f"(the last: {what}) and were skipped; max_skipped_updates={self.max_in_a_row} stops the run"
            )
        now = self._clock()
        if self._warned_at is None or now - self._warned_at >= self.warning_interval:
            self._warned_at = now
            logger.warning(
                "task %r skipped an update with a non-finite %s (%d skipped so far, %d in a row; "
                "%d in a row stop the run)",
                self.task,
                what,
                self.total,
                self.in_a_row,
                self.max_in_a_row,
            )
