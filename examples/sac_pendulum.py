"""SAC with automatic entropy tuning on Pendulum-v1.

    python examples/sac_pendulum.py [--agents 1] [--seed 0] [--max-steps 30000]

Trains until a deterministic (mean-action) 10-episode evaluation reaches the
target mean return (or the env step budget runs out), printing progress, then
prints a deterministic 10-episode evaluation on fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import continuous_control
from continuous_control import ACTION_DIM, OBS_DIM, ReplaySettings, make_env

import parl
from parl.algorithms.sac import SAC
from parl.models.continuous import GaussianActorCritic
from parl.utils import RandomStartAgent


@dataclass
class Settings(ReplaySettings):
    """Hyperparameters of this example, chosen by measurement on Pendulum-v1 (docs/algorithms/sac.md)."""

    initial_alpha: float = 1.0


def make_algorithm_func(s: Settings) -> Callable[[], SAC]:
    """The SAC factory for ``s`` (the Manager and the evaluator each build one)."""
    return parl.create_algorithm_func(
        GaussianActorCritic,
        dict(obs_dim=OBS_DIM, action_dim=ACTION_DIM, num_critics=2, hidden_sizes=s.hidden_sizes),
        SAC,
        dict(gamma=s.gamma, tau=s.tau, learning_rate=s.learning_rate, initial_alpha=s.initial_alpha),
    )


def make_agent(s: Settings, seed: int) -> RandomStartAgent:
    """One agent: random actions for ``s.random_steps`` steps, then samples of the policy."""
    return RandomStartAgent(make_env(), random_steps=s.random_steps, seed=seed)


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
