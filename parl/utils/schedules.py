"""Schedules for hyperparameters that change with steps (exploration rates, learning rates)."""

from __future__ import annotations

from parl.validation import check_int


class LinearSchedule:
    """``start`` at step 0, moving linearly to ``end`` at ``steps``, then constant."""

    def __init__(self, start: float, end: float, steps: int) -> None:
        self.start = float(start)
        self.end = float(end)
        self.steps = check_int("steps", steps, 1)

    def __call__(self, step: int) -> float:
        fraction = min(max(step, 0) / self.steps, 1.0)
        return self.start + fraction * (self.end - self.start)
