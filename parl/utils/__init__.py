"""parl.utils: schedules, evaluation, the gymnasium agent and its exploring subclasses, action repeat."""

from parl.utils.action_repeat import ActionRepeat
from parl.utils.evaluation import evaluate
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
    "evaluate",
    "obs_inputs",
]


def __getattr__(name: str) -> object:
    """The deprecated names of ``parl.utils`` (``train_agents``, ``train_until``, ``greedy_check``;
    docs/api.md), each with a DeprecationWarning."""
    from parl.compat.moved import moved_attribute

    return moved_attribute(__name__, name)
