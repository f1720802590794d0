"""parl.utils: schedules, evaluation, the gymnasium agent and the training loop shared by examples and tests."""

from parl.utils.evaluation import evaluate
from parl.utils.gym_agent import GymAgent, env_action_converter, obs_inputs
from parl.utils.schedules import LinearSchedule
from parl.utils.training import greedy_check, train_agents, train_until

__all__ = [
    "GymAgent",
    "LinearSchedule",
    "env_action_converter",
    "evaluate",
    "greedy_check",
    "obs_inputs",
    "train_agents",
    "train_until",
]
