"""``ExpReplayHelper(sample_interval=k)`` of parl before 0.2.0: one batch every ``k`` stored steps,
which is ``updates_per_step=1/k`` now (exactly: ``ceil(n / k)`` batches after ``n`` warm steps).

    parl.ExpReplayHelper(sample_interval=4)       # DeprecationWarning; the same as updates_per_step=0.25
"""

from __future__ import annotations

from parl.moved_names import DEPRECATED_IN, deprecated
from parl.validation import ParameterError, check_int


def updates_per_step_of(sample_interval: int, updates_per_step: float) -> float:
    """The ``updates_per_step`` that ``sample_interval`` stands for, with its DeprecationWarning
    (pointing at the code that made the helper).

    Raises:
        ValueError: ``sample_interval`` is not an int >= 1, or ``updates_per_step`` was given too
            (it is not its default, 1).
    """
    # Frames: deprecated, here, ExpReplayHelper.__init__, the code that made the helper.
    old, new = "ExpReplayHelper(sample_interval=k)", "ExpReplayHelper(updates_per_step=1/k)"
    deprecated(old, new, DEPRECATED_IN, stacklevel=4)
    interval = check_int("sample_interval", sample_interval, 1)
    if updates_per_step != 1.0:
        expected = f"left out when updates_per_step is given (updates_per_step={updates_per_step!r} replaces it)"
        raise ParameterError("sample_interval", expected, sample_interval)
    return 1.0 / interval
