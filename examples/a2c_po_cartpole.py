"""A2C with an LSTM policy on a partially observed CartPole-v1: the velocities are hidden.

    python examples/a2c_po_cartpole.py [--model lstm|mlp] [--agents 8] [--seed 0] [--max-steps 150000]

The agents see only the cart position and the pole angle, so a good policy
must infer both velocities from what it saw before: the LSTM policy carries
that memory through its state specs, a feedforward MLP cannot. Everything
else (agents, helpers, training loop) is examples/a2c_cartpole.py's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

# Loaded by path (tests, benchmarks) as well as run as a script: make the sibling example importable.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import a2c_cartpole  # noqa: E402

from parl.utils.cli import example_parser, run_example  # noqa: E402

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
    return HideVelocities(gym.make(a2c_cartpole.ENV_ID))


@dataclass
class Settings(a2c_cartpole.Settings):
    """examples/a2c_cartpole.py's settings with an LSTM policy, chosen by measurement here (docs/algorithms/a2c.md)."""

    model: str = "lstm"
    learning_rate: float = 3e-3
    sample_interval: int = 32


def train(
    seed: int = 0,
    max_steps: int = 150_000,
    target: float = 400.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train on the partially observed CartPole until a greedy check reaches ``target`` or ``max_steps`` env
    steps pass (see :func:`a2c_cartpole.train`)."""
    return a2c_cartpole.train(
        seed, max_steps, target, eval_episodes, settings or Settings(), verbose, make_env, placement=placement
    )


if __name__ == "__main__":
    parser = example_parser(__doc__, max_steps=150_000, target=400.0, agents=Settings.agents)
    parser.add_argument("--model", choices=a2c_cartpole.MODELS, default=Settings.model, help="policy network")
    args = parser.parse_args()
    run_example(train, args, Settings(agents=args.agents, model=args.model))
