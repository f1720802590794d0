"""DDPG on Pendulum-v1, exploring with Gaussian action noise.

    python examples/ddpg_pendulum.py [--agents 1] [--seed 0] [--max-steps 30000]

Trains until a deterministic 10-episode evaluation reaches the target mean
return (or the env step budget runs out), printing progress, then prints a
deterministic 10-episode evaluation on fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import continuous_control
from continuous_control import ACTION_DIM, OBS_DIM, ReplaySettings, make_env

import parl
from parl.algorithms.ddpg import DDPG
from parl.models.continuous import DeterministicActorCritic
from parl.utils import GaussianNoiseAgent


@dataclass
class Settings(ReplaySettings):
    """Hyperparameters of this example, chosen by measurement on Pendulum-v1 (docs/algorithms/ddpg.md)."""

    exploration_noise: float = 0.1  # std of the Gaussian added to actions in [-1, 1]


def make_algorithm_func(s: Settings) -> Callable[[], DDPG]:
    """The DDPG factory for ``s`` (one critic, as the paper)."""
    return parl.create_algorithm_func(
        DeterministicActorCritic,
        dict(obs_dim=OBS_DIM, action_dim=ACTION_DIM, num_critics=1, hidden_sizes=s.hidden_sizes),
        DDPG,
        dict(gamma=s.gamma, tau=s.tau, learning_rate=s.learning_rate),
    )


def make_agent(s: Settings, seed: int) -> GaussianNoiseAgent:
    """One agent: random actions for ``s.random_steps`` steps, then the policy plus Gaussian noise."""
    return GaussianNoiseAgent(make_env(), noise_std=s.exploration_noise, random_steps=s.random_steps, seed=seed)


def train(
    seed: int = 0,
    max_steps: int = 30_000,
    target: float = -200.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train until a greedy check reaches ``target`` or ``max_steps`` env steps pass (see
    :func:`parl.utils.train_until`)."""
    s = settings or Settings()
    return continuous_control.train(
        s,
        make_algorithm_func(s),
        lambda agent_seed: make_agent(s, agent_seed),
        seed=seed,
        max_steps=max_steps,
        target=target,
        eval_episodes=eval_episodes,
        verbose=verbose,
        placement=placement,
    )


if __name__ == "__main__":
    continuous_control.main(__doc__, train, Settings, max_steps=30_000)
