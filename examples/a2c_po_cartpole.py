"""A2C with an LSTM policy on a partially observed CartPole-v1: the velocities are hidden.

    python examples/a2c_po_cartpole.py [--seed 0] [--agents 8] [--placement threads] [--max-steps 150000]
    python examples/a2c_po_cartpole.py --config examples/configs/a2c_po_cartpole_mlp.yaml   # a feedforward policy

The agents see only the cart position and the pole angle, so a good policy
must infer both velocities from what it saw before: the LSTM policy carries
that memory through its state specs, a feedforward MLP cannot. The robot is
examples/configs/a2c_po_cartpole.yaml, whose environment is :func:`make_env`;
everything else is examples/a2c_cartpole.py's algorithm with its own settings.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from parl.experiment.train.launch import example_config, launch

#: Indices of CartPole's observation that stay visible: cart position and pole angle.
VISIBLE = (0, 2)


class HideVelocities(gym.ObservationWrapper):
    """Keeps cart position and pole angle of CartPole's observation; drops both velocities."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(
            low=space.low[list(VISIBLE)], high=space.high[list(VISIBLE)], dtype=space.dtype
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[list(VISIBLE)]


def make_env() -> gym.Env:
    """CartPole-v1 with its velocities hidden: the environment of the config."""
    return HideVelocities(gym.make("CartPole-v1"))


if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
