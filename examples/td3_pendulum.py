"""TD3 on Pendulum-v1, exploring with Gaussian action noise (the DDPG example's agent and settings).

    python examples/td3_pendulum.py [--agents 1] [--seed 0] [--max-steps 30000]

Trains until a deterministic 10-episode evaluation reaches the target mean
return (or the env step budget runs out), printing progress, then prints a
deterministic 10-episode evaluation on fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import continuous_control
import ddpg_pendulum
from continuous_control import ACTION_DIM, OBS_DIM

import parl
from parl.algorithms.td3 import TD3
from parl.models.continuous import DeterministicActorCritic


@dataclass
class Settings(ddpg_pendulum.Settings):
    """Hyperparameters of this example, chosen by measurement on Pendulum-v1 (docs/algorithms/td3.md)."""

    policy_delay: int = 2
    target_noise: float = 0.2
    noise_clip: float = 0.5


def make_algorithm_func(s: Settings) -> Callable[[], TD3]:
    """The TD3 factory for ``s`` (twin critics)."""
    return parl.create_algorithm_func(
        DeterministicActorCritic,
        dict(obs_dim=OBS_DIM, action_dim=ACTION_DIM, num_critics=2, hidden_sizes=s.hidden_sizes),
        TD3,
        dict(
            gamma=s.gamma,
            tau=s.tau,
            learning_rate=s.learning_rate,
            policy_delay=s.policy_delay,
            target_noise=s.target_noise,
            noise_clip=s.noise_clip,
        ),
    )


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
        lambda agent_seed: ddpg_pendulum.make_agent(s, agent_seed),
        seed=seed,
        max_steps=max_steps,
        target=target,
        eval_episodes=eval_episodes,
        verbose=verbose,
        placement=placement,
    )


if __name__ == "__main__":
    continuous_control.main(__doc__, train, Settings, max_steps=30_000)
