"""DQN on CartPole-v1 with 4 agents as threads feeding one ComputationTask.

    python examples/dqn_cartpole.py [--agents 4] [--seed 0] [--max-steps 150000]
    python examples/dqn_cartpole.py --dueling --prioritized --n-step 3     # the options of docs/replay.md

Trains until a greedy 10-episode evaluation reaches the target mean return
and 50 more episodes confirm it (or the env step budget runs out), printing
progress, then prints a greedy 50-episode evaluation on fresh seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import gymnasium as gym

import parl
from parl.algorithms import DQN
from parl.models import MLPQModel
from parl.utils import EpsilonGreedyAgent, LinearSchedule, train_agents
from parl.utils.cli import example_parser, run_example

ENV_ID = "CartPole-v1"


@dataclass
class Settings:
    """Hyperparameters of this example, chosen by measurement on CartPole-v1 (docs/benchmarks.md)."""

    # The settings of the last row of docs/benchmarks.md's DQN table: 29 of 30 seeds reached 475 over
    # three runs, where 8 agents reached it on 37 of 40: each update samples one agent's buffer, and
    # 4 agents' buffers each hold twice the experience.
    agents: int = 4
    hidden_sizes: tuple = (64, 64)
    learning_rate: float = 1e-3
    gamma: float = 0.99
    target_update_interval: int = 100  # optimizer updates between target copies (200 env steps)
    grad_clip: Optional[float] = 10.0  # global gradient-norm bound (as SB3); without it 2 of 11 seeds stalled
    tau: float = 1.0  # a hard copy, as the paper
    epsilon_start: float = 1.0
    epsilon_end: float = 0.02
    epsilon_steps: int = 2_000  # per agent: 8,000 env steps in all, as rl-zoo's 16% of 50k
    capacity: int = 20_000  # per agent
    batch_size: int = 64  # per update
    warmup_steps: int = 500  # per agent
    updates_per_step: float = 0.5  # updates per env step, as rl-zoo (128 updates per 256 steps)
    max_batchsize: int = 64
    max_in_flight: int = 0  # batches an agent hands over without waiting (docs/replay.md); 0: it waits
    # Options of docs/replay.md, off by default (measured there against these defaults).
    dueling: bool = False  # dueling Q head (Wang et al., 2016)
    prioritized: bool = False  # proportional prioritized replay (Schaul et al., 2016)
    priority_alpha: float = 0.6  # the paper's
    beta_start: float = 0.4  # the paper's
    beta_steps: int = 5_000  # per agent: about the agent steps of a run, as the paper anneals over all of training
    n_step: int = 1  # env steps per replayed transition


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


def make_algorithm_func(s: Settings) -> Callable[[], DQN]:
    """The DQN factory for ``s`` (the Manager and the evaluator each build one)."""
    return parl.create_algorithm_func(
        MLPQModel,
        dict(obs_dim=4, num_actions=2, hidden_sizes=s.hidden_sizes, dueling=s.dueling),
        DQN,
        dict(
            gamma=s.gamma,
            learning_rate=s.learning_rate,
            target_update_interval=s.target_update_interval,
            tau=s.tau,
            grad_clip=s.grad_clip,
        ),
    )


def make_helper(s: Settings, seed: int) -> parl.ExpReplayHelper:
    """One agent's replay helper for ``s``."""
    return parl.ExpReplayHelper(
        capacity=s.capacity,
        batch_size=s.batch_size,
        warmup_steps=s.warmup_steps,
        updates_per_step=s.updates_per_step,
        seed=seed,
        prioritized=s.prioritized,
        alpha=s.priority_alpha,
        beta_start=s.beta_start,
        beta_steps=s.beta_steps,
        n_step=s.n_step,
        gamma=s.gamma,  # the n-step sums discount as DQN does
        max_in_flight=s.max_in_flight,
    )


def make_settings(s: Settings) -> parl.TaskSettings:
    """The task settings for ``s``."""
    return parl.TaskSettings(make_algorithm_func(s), max_batchsize=s.max_batchsize)


def train(
    seed: int = 0,
    max_steps: int = 150_000,
    target: float = 475.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    placement: str = "threads",
) -> Dict[str, float]:
    """Train until a greedy check reaches ``target`` or ``max_steps`` env steps pass (see
    :func:`parl.utils.train_agents`); ``placement`` is the Manager's ("threads" or "cooperative")."""
    s = settings or Settings()

    def make_agent(agent_seed: int) -> EpsilonGreedyAgent:
        epsilon = LinearSchedule(s.epsilon_start, s.epsilon_end, s.epsilon_steps)
        return EpsilonGreedyAgent(make_env(), epsilon=epsilon, seed=agent_seed)

    return train_agents(
        make_settings(s),
        make_env,
        make_agent,
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
    parser = example_parser(__doc__, max_steps=150_000, target=475.0, agents=Settings.agents)
    parser.add_argument("--dueling", action="store_true", help="dueling Q head")
    parser.add_argument("--prioritized", action="store_true", help="prioritized replay")
    parser.add_argument("--n-step", type=int, default=Settings.n_step, help="env steps per replayed transition")
    args = parser.parse_args()
    settings = Settings(agents=args.agents, dueling=args.dueling, prioritized=args.prioritized, n_step=args.n_step)
    run_example(train, args, settings)
