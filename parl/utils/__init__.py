"""parl.utils: schedules, the gymnasium agent and its exploring subclasses, action repeat.

``parl.utils.evaluate`` moved to :func:`parl.experiment.evaluation.evaluate` (deprecated here).
"""

from parl.moved_names import moved_attribute as _moved_attribute
from parl.utils.action_repeat import ActionRepeat
from parl.utils.env_steps import EnvStepsAgent
from parl.utils.exploration import EpsilonGreedyAgent, GaussianNoiseAgent, OUNoise, OUNoiseAgent, RandomStartAgent
from parl.utils.gym_agent import GymAgent, env_action_converter, model_action_converter, obs_inputs
from parl.utils.observations import observation_mapper
from parl.utils.schedules import LinearSchedule

__all__ = [
    "ActionRepeat",
    "EnvStepsAgent",
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
    "observation_mapper",
]


def __getattr__(name: str) -> object:
    """The deprecated names of ``parl.utils`` (``evaluate``, ``train_agents``, ``train_until``,
    ``greedy_check``; docs/api.md), each with a DeprecationWarning."""
    return _moved_attribute(__name__, name)
