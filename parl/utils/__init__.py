"""parl.utils: schedules, the gymnasium agent and its exploring subclasses, action repeat.

``parl.utils.evaluate`` moved to :func:`parl.experiment.evaluation.evaluate` (deprecated here).
"""

from parl.utils.action_repeat import ActionRepeat
from parl.utils.exploration import EpsilonGreedyAgent, GaussianNoiseAgent, OUNoise, OUNoiseAgent, RandomStartAgent
from parl.utils.gym_agent import GymAgent, env_action_converter, model_action_converter, obs_inputs
from parl.utils.schedules import LinearSchedule

__all__ = [
    "ActionRepeat",
    "EpsilonGreedyAgent",
    "GaussianNoiseAgent",
    "GymAgent",
    "LinearSchedule",
    "OUNoise",
    "OUNoiseAgent",
    "RandomStartAgent",
    "env_action_converter",
    "model_action_converter",
    "obs_inputs",
]


def __getattr__(name: str) -> object:
    if name == "evaluate":
        from parl.moved_names import deprecated

        deprecated("parl.utils.evaluate", "parl.experiment.evaluation.evaluate", since="0.2.0")
        from parl.experiment.evaluation.greedy import evaluate

        globals()["evaluate"] = evaluate  # warned once: ``from parl.utils import evaluate`` looks twice
        return evaluate
    raise AttributeError(f"module 'parl.utils' has no attribute {name!r}")
