"""A2C on CartPole-v1 with 8 agents as threads feeding one ComputationTask.

    python examples/a2c_cartpole.py [--agents 8] [--seed 0] [--max-steps 200000]

Every agent sends its last ``sample_interval`` steps as one segment (sooner
at an episode's end); the wrapper joins the segments that arrive together
into one update with n-step returns. Trains until a greedy 10-episode
evaluation reaches the target mean return (or the env step budget runs out),
printing progress, then prints a greedy 10-episode evaluation on fresh seeds.

examples/a2c_po_cartpole.py reuses these pieces with an LSTM policy on a
partially observed CartPole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import gymnasium as gym

import parl
from parl.algorithms.a2c import A2C
from parl.models import LSTMActorCritic, MLPActorCritic
from parl.utils import GymAgent, train_agents
from parl.utils.cli import example_parser, run_example

ENV_ID = "CartPole-v1"
#: The policy networks this example can train.
MODELS = ("mlp", "lstm")


@dataclass
class Settings:
    """Hyperparameters of this example, chosen by measurement on CartPole-v1 (docs/algorithms/a2c.md)."""

    agents: int = 8
    model: str = "mlp"  # "mlp": MLPActorCritic; "lstm": LSTMActorCritic
    hidden_sizes: tuple = (64, 64)  # the MLP's layers
    lstm_size: int = 64  # the LSTM's width
    learning_rate: float = 2e-3  # Baselines' 7e-4 needed several times the env steps here
    optimizer: str = "rmsprop"
    gamma: float = 0.99
    gae_lambda: float = 1.0
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    grad_clip: Optional[float] = 0.5
    normalize_advantages: bool = False
    sample_interval: int = 64  # env steps per segment at most (A3C's t_max); measured better than 32 and 128
    normalize_inputs: bool = True  # observations scaled by running mean and std (in the task)
    reward_scale: float = 0.1  # rewards times this before learning (in the task): keeps the value loss small
    max_batchsize: int = 64
    min_batchsize: int = 1  # agents' segments to wait for before an update
    max_training_batchsize: Optional[int] = None  # agents' segments joined per update (None: all that arrive)


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


def make_algorithm_func(s: Settings, obs_dim: int = 4, num_actions: int = 2) -> Callable[[], A2C]:
    """The A2C factory for ``s`` (the Manager and the evaluator each build one)."""
    if s.model == "lstm":
        model_class, model_args = LSTMActorCritic, dict(hidden_size=s.lstm_size)
    elif s.model == "mlp":
        model_class, model_args = MLPActorCritic, dict(hidden_sizes=s.hidden_sizes)
    else:
        raise ValueError(f"model must be one of {list(MODELS)}, got {s.model!r}")
    return parl.create_algorithm_func(
        model_class,
        dict(obs_dim=obs_dim, num_actions=num_actions, **model_args),
        A2C,
        dict(
            gamma=s.gamma,
            learning_rate=s.learning_rate,
            gae_lambda=s.gae_lambda,
            value_coef=s.value_coef,
            entropy_coef=s.entropy_coef,
            grad_clip=s.grad_clip,
            normalize_advantages=s.normalize_advantages,
            optimizer=s.optimizer,
        ),
    )


def make_helper(s: Settings, seed: int) -> parl.OnPolicyHelper:
    """One agent's helper (``seed`` is unused: the policy samples)."""
    return parl.OnPolicyHelper(sample_interval=s.sample_interval)


def make_settings(s: Settings, obs_dim: int = 4, num_actions: int = 2) -> parl.TaskSettings:
    """The task settings for ``s``."""
    return parl.TaskSettings(
        make_algorithm_func(s, obs_dim, num_actions),
        max_batchsize=s.max_batchsize,
        min_batchsize=s.min_batchsize,
        max_training_batchsize=s.max_training_batchsize,
        normalize_inputs=s.normalize_inputs,
        reward_scale=s.reward_scale,
    )


def train(
    seed: int = 0,
    max_steps: int = 200_000,
    target: float = 475.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    env_func: Callable[[], Any] = make_env,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train on environments from ``env_func`` until a greedy check reaches ``target`` or ``max_steps``
    env steps pass (see :func:`parl.utils.train_agents`); ``placement`` is the Manager's ("threads" or
    "cooperative")."""
    s = settings or Settings()
    probe = env_func()
    task_settings = make_settings(s, probe.observation_space.shape[0], probe.action_space.n)
    probe.close()
    return train_agents(
        task_settings,
        env_func,
        lambda agent_seed: GymAgent(env_func(), seed=agent_seed),
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
