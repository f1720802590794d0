"""parl.utils: schedules, evaluation, the gymnasium agent and its exploring subclasses, the training loop."""

from parl.utils.evaluation import evaluate
from parl.utils.exploration import EpsilonGreedyAgent, GaussianNoiseAgent, OUNoise, OUNoiseAgent, RandomStartAgent
from parl.utils.gym_agent import GymAgent, env_action_converter, obs_inputs
from parl.utils.schedules import LinearSchedule
from parl.utils.training import greedy_check, train_agents, train_until

__all__ = [
    "EpsilonGreedyAgent",
    "GaussianNoiseAgent",
    "GymAgent",
    "LinearSchedule",
    "OUNoise",
    "OUNoiseAgent",
    "RandomStartAgent",
    "env_action_converter",
    "evaluate",
    "greedy_check",
    "obs_inputs",
    "train_agents",
    "train_until",
]
