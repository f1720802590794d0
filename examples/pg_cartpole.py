"""REINFORCE with a learned baseline on CartPole-v1, agents as threads feeding one ComputationTask.

    python examples/pg_cartpole.py [--agents 8] [--seed 0] [--max-steps 200000]

Each agent sends every episode whole (Monte-Carlo returns); the wrapper joins
the episodes that arrive together into one update. Trains until a greedy
10-episode evaluation reaches the target mean return (or the env step budget
runs out), printing progress, then prints a greedy 10-episode evaluation on
fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import gymnasium as gym

import parl
from parl.algorithms.policy_gradient import PolicyGradient
from parl.models import MLPActorCritic
from parl.utils import GymAgent, train_agents
from parl.utils.cli import example_parser, run_example

ENV_ID = "CartPole-v1"
#: Longer than any CartPole-v1 episode (500 steps), so each episode is sent whole.
EPISODE_SEGMENT = 1_000


@dataclass
class Settings:
    """Hyperparameters of this example, chosen by measurement on CartPole-v1 (docs/algorithms/policy_gradient.md)."""

    agents: int = 8
    hidden_sizes: tuple = (64, 64)
    learning_rate: float = 3e-3
    gamma: float = 0.99
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    grad_clip: Optional[float] = None
    normalize_advantages: bool = True
    normalize_inputs: bool = True  # observations scaled by running mean and std (in the task); measured faster
    max_batchsize: int = 64
    max_training_batchsize: Optional[int] = None  # episodes joined per update (None: all that arrive together)


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


def make_algorithm_func(s: Settings) -> Callable[[], PolicyGradient]:
    """The PolicyGradient factory for ``s`` (the Manager and the evaluator each build one)."""
    return parl.create_algorithm_func(
        MLPActorCritic,
        dict(obs_dim=4, num_actions=2, hidden_sizes=s.hidden_sizes),
        PolicyGradient,
        dict(
            gamma=s.gamma,
            learning_rate=s.learning_rate,
            value_coef=s.value_coef,
            entropy_coef=s.entropy_coef,
            grad_clip=s.grad_clip,
            normalize_advantages=s.normalize_advantages,
        ),
    )


def make_helper(s: Settings, seed: int) -> parl.OnPolicyHelper:
    """One agent's helper: it sends each episode whole (``seed`` is unused: the policy samples)."""
    return parl.OnPolicyHelper(sample_interval=EPISODE_SEGMENT)


def make_settings(s: Settings) -> parl.TaskSettings:
    """The task settings for ``s``."""
    return parl.TaskSettings(
        make_algorithm_func(s),
        max_batchsize=s.max_batchsize,
        max_training_batchsize=s.max_training_batchsize,
        normalize_inputs=s.normalize_inputs,
    )


def train(
    seed: int = 0,
    max_steps: int = 200_000,
    target: float = 475.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train until a greedy check reaches ``target`` or ``max_steps`` env steps pass (see
    :func:`parl.utils.train_agents`); ``placement`` is the Manager's ("threads" or "cooperative")."""
    s = settings or Settings()
    return train_agents(
        make_settings(s),
        make_env,
        lambda agent_seed: GymAgent(make_env(), seed=agent_seed),
        lambda agent_seed: make_helper(s, agent_seed),
        agents=s.agents,
        seed=seed,
        target=target,
        max_steps=max_steps,
        eval_episodes=eval_episodes,
        check_from=0.3 * target,
        placement=placement,
        verbose=verbose,
    )


if __name__ == "__main__":
    args = example_parser(__doc__, max_steps=200_000, target=475.0, agents=Settings.agents).parse_args()
    run_example(train, args, Settings(agents=args.agents))
