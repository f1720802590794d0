"""parl.algorithms: one file of math per algorithm.

The RL algorithms are exported here (each under tests/test_algorithm_contract.py); auxiliary ones,
such as ``parl.algorithms.reward_prediction.RewardPrediction``, are imported from their modules.
"""

from parl.algorithms.a2c import A2C
from parl.algorithms.appo import APPO
from parl.algorithms.ddpg import DDPG
from parl.algorithms.dqn import DQN
from parl.algorithms.impala import IMPALA
from parl.algorithms.policy_gradient import PolicyGradient
from parl.algorithms.ppo import PPO
from parl.algorithms.sac import SAC
from parl.algorithms.td3 import TD3

__all__ = ["A2C", "APPO", "DDPG", "DQN", "IMPALA", "PPO", "PolicyGradient", "SAC", "TD3"]
