"""parl.utils: schedules, evaluation, the gymnasium agent and its exploring subclasses."""

from parl.utils.evaluation import evaluate
from parl.utils.exploration import EpsilonGreedyAgent, GaussianNoiseAgent, OUNoise, OUNoiseAgent, RandomStartAgent
from parl.utils.gym_agent import GymAgent, env_action_converter, model_action_converter, obs_inputs
from parl.utils.schedules import LinearSchedule

__all__ = [
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
