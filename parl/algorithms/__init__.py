"""parl.algorithms: one file of math per algorithm."""

from parl.algorithms.dqn import DQN

__all__ = ["DQN"]
