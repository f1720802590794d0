"""What the Pendulum examples share: the environment, the settings every replay-based
actor-critic needs, and the training run. The exploring agents are parl's (parl/utils/exploration.py):

    examples/ddpg_pendulum.py, examples/td3_pendulum.py   GaussianNoiseAgent (noise is the agent's choice)
    examples/sac_pendulum.py                              RandomStartAgent (the policy samples its own noise)

Each example defines its ``Settings`` (a subclass of :class:`ReplaySettings`)
and ``make_algorithm_func``; :func:`train` does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Type

import gymnasium as gym
import numpy as np

import parl
from parl.utils import GymAgent, train_agents
from parl.utils.cli import example_parser, run_example

ENV_ID = "Pendulum-v1"
OBS_DIM = 3  # cos(theta), sin(theta), angular velocity
ACTION_DIM = 1  # torque, scaled from [-1, 1] to [-2, 2] by GymAgent

ArrayDict = Dict[str, np.ndarray]


@dataclass
class ReplaySettings:
    """Settings every example here has, measured on Pendulum-v1 for all three algorithms
    (docs/algorithms/sac.md): with targets and a learning rate 10x the papers', SAC needs about a
    quarter of the updates to a deterministic -200."""

    agents: int = 1
    hidden_sizes: tuple = (128, 128)  # 64-64 needed ~1.5x the updates; 256-256 fewer, each 2-3x the time
    learning_rate: float = 3e-3  # 10x SAC's and TD3's 3e-4
    gamma: float = 0.99
    tau: float = 0.05  # Polyak rate per update, 10x SAC's and TD3's 0.005 (fewer updates to the target)
    capacity: int = 100_000  # per agent
    batch_size: int = 256  # per update
    random_steps: int = 1_000  # per agent: uniform random actions first
    warmup_steps: int = 1_000  # per agent: transitions stored before the first update
    updates_per_step: float = 1.0  # updates per env step (the update-to-data ratio), as SAC and TD3
    max_in_flight: int = 0  # batches an agent hands over without waiting (docs/replay.md); 0: it waits
    check_interval: int = 200  # env steps between greedy checks (one Pendulum episode)


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


def make_helper(s: ReplaySettings, seed: int) -> parl.ExpReplayHelper:
    """One agent's replay helper for ``s``."""
    return parl.ExpReplayHelper(
        capacity=s.capacity,
        batch_size=s.batch_size,
        warmup_steps=s.warmup_steps,
        updates_per_step=s.updates_per_step,
        seed=seed,
        max_in_flight=s.max_in_flight,
    )


def make_settings(s: ReplaySettings, algorithm_func: Callable[[], parl.Algorithm]) -> parl.TaskSettings:
    """The task settings for ``s``."""
    return parl.TaskSettings(algorithm_func, max_batchsize=max(s.agents, 1))


def train(
    s: ReplaySettings,
    algorithm_func: Callable[[], parl.Algorithm],
    make_agent: Callable[[int], GymAgent],
    *,
    seed: int,
    max_steps: int,
    target: float,
    eval_episodes: int,
    verbose: bool,
    placement: str = "threads",
) -> Dict[str, Any]:
    """Train ``s.agents`` agents (``make_agent(agent_seed)``) until a greedy check reaches ``target`` or
    ``max_steps`` env steps pass (see :func:`parl.utils.train_agents`), placed by ``placement``."""
    return train_agents(
        make_settings(s, algorithm_func),
        make_env,
        make_agent,
        lambda agent_seed: make_helper(s, agent_seed),
        agents=s.agents,
        seed=seed,
        target=target,
        max_steps=max_steps,
        eval_episodes=eval_episodes,
        check_interval=s.check_interval,
        placement=placement,
        verbose=verbose,
    )


def main(
    doc: str, train_func: Callable[..., Dict[str, Any]], settings_class: Type[ReplaySettings], max_steps: int
) -> None:
    """The command line of an example: parse ``example_parser`` options and call its ``train``."""
    args = example_parser(doc, max_steps=max_steps, target=-200.0, agents=settings_class.agents).parse_args()
    run_example(train_func, args, settings_class(agents=args.agents))
