"""parl.utils: schedules and evaluation shared by examples and tests."""

from parl.utils.evaluation import evaluate
from parl.utils.schedules import LinearSchedule

__all__ = ["LinearSchedule", "evaluate"]
