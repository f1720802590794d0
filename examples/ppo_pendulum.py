"""PPO on Pendulum-v1: continuous actions from a Gaussian policy, with the pieces of ppo_cartpole.py.

    python examples/ppo_pendulum.py [--agents 4] [--seed 0] [--max-steps 300000]

The policy acts in [-1, 1] (scaled to the torque bounds by the agent);
observations are normalized by running statistics and rewards scaled by 0.1
in the task, not in the algorithm. Every Pendulum episode is cut at 200 steps
(a truncation, so PPO bootstraps there); each agent's segment is its episode.
Trains until a greedy 10-episode evaluation reaches the target mean return,
then prints a greedy 10-episode evaluation on fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import gymnasium as gym
import ppo_cartpole
from ppo_cartpole import make_algorithm_func, make_helper, make_settings

from parl.utils.cli import example_parser, run_example

ENV_ID = "Pendulum-v1"

__all__ = ["Settings", "make_algorithm_func", "make_env", "make_helper", "make_settings", "train"]


@dataclass
class Settings(ppo_cartpole.Settings):
    """Hyperparameters of this example, chosen by measurement on Pendulum-v1 (docs/algorithms/ppo.md)."""

    env_id: str = ENV_ID
    agents: int = 4
    n_steps: int = 200  # a whole episode per segment
    gamma: float = 0.9  # the short horizon rl-zoo uses for Pendulum
    gae_lambda: float = 0.95
    learning_rate: float = 1e-3
    epochs: int = 10
    num_minibatches: int = 16
    normalize_inputs: bool = True
    reward_scale: float = 0.1
    check_from: Optional[float] = None  # greedy checks (200 steps each) from the start


def make_env() -> gym.Env:
    return ppo_cartpole.make_env(ENV_ID)


def train(
    seed: int = 0,
    max_steps: int = 300_000,
    target: float = -300.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train until a greedy check reaches ``target`` or ``max_steps`` env steps pass (see
    :func:`parl.utils.train_until`)."""
    return ppo_cartpole.train(seed, max_steps, target, eval_episodes, settings or Settings(), verbose, placement)


if __name__ == "__main__":
    args = example_parser(__doc__, max_steps=300_000, target=-300.0, agents=Settings.agents).parse_args()
    run_example(train, args, Settings(agents=args.agents))
