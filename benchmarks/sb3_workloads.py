"""Stable-Baselines3's side of benchmarks/workloads.py: one training run of a heavy workload, timed.

    .venv-sb3/bin/python benchmarks/sb3_workloads.py --workload dqn-atari --budget 6000 --learning-starts 1000
    .venv-sb3/bin/python benchmarks/sb3_workloads.py --workload sac-halfcheetah --budget 100000 --eval-episodes 25

Runs in the ``.venv-sb3`` virtualenv (``make .venv-sb3``, benchmarks/requirements-sb3.txt); imports neither
parl nor paddle (MinAtar's environment comes from examples/minatar_env.py, which needs neither). Each
workload is rl-baselines3-zoo 2.9.2's settings for it (benchmarks/sb3_zoo.json), or parl's config's where
the zoo has none:

- ``dqn-atari``: ``DQN("CnnPolicy")`` with the zoo's ``atari`` entry of hyperparams/dqn.yml on ALE/Pong-v5
  through ``make_atari_env`` (AtariWrapper: 30 no-op frames at most, each action for 4 frames with the
  maximum of the last two, 84x84 grayscale, rewards clipped, FIRE at reset) and ``VecFrameStack(4)``; the
  ALE env has ``frameskip=1`` and ALE's own sticky actions at 0.25, as examples/configs/dqn_atari.yaml.
  Epsilon falls from 1 to 0.01 over 1M action steps, as the zoo's 10% of its 10M whatever ``--budget`` is.
- ``sac-halfcheetah``: ``SAC("MlpPolicy")`` on HalfCheetah-v5 with the zoo's ``mujoco-defaults`` (SB3's
  defaults: 256x256, batch 256, one update per env step, uniform random actions before learning starts).
- ``ppo-atari``: ``PPO("CnnPolicy")`` with the zoo's ``atari`` entry of hyperparams/ppo.yml: 8 envs
  (``make_atari_env``, a DummyVecEnv) and ``VecFrameStack(4)``, n_steps 128, 4 epochs, batch 256; the ALE
  env has ``frameskip=1`` and no sticky actions (the zoo's NoFrameskip-v4 games, as
  examples/configs/ppo_atari.yaml).
- ``dqn-minatar``: ``DQN`` on MinAtar Breakout with examples/configs/dqn_minatar.yaml's settings (the zoo
  has none): MinAtar's network (conv 16 3x3, fc 128), Adam 1e-3, 3-step returns, one update of 32 per 4
  steps, target every 1,000 steps, epsilon 1 -> 0.05 over 10,000 steps.

The time runs from the start of ``learn()`` to its end (after imports, environment and model set-up).
Prints one line ``RESULT {json}`` with benchmarks/parl_runner.py's keys where they apply: ``seed``,
``env_steps`` (action steps, all environments together), ``updates`` (gradient steps), ``episodes``,
``train_seconds``, ``run_cpu_seconds`` (the process's CPU time in ``learn()``), ``cpu_seconds`` (over the
whole call), ``budget``, and with
``--eval-episodes`` ``greedy_mean_return``: the mean of that many deterministic episodes on the seeds of
parl's final evaluation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import ale_py
import gymnasium as gym
import numpy as np
import torch
from sb3_runner import ZOO, evaluate, final_seed
from stable_baselines3 import DQN, PPO, SAC
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
gym.register_envs(ale_py)

PONG = "ALE/Pong-v5"


class MinAtarCNN(BaseFeaturesExtractor):
    """MinAtar's network body (parl.models.MinAtarQModel): a 3x3 convolution of 16 channels, then 128 units."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128) -> None:
        super().__init__(observation_space, features_dim)
        channels, rows, cols = observation_space.shape
        self.net = nn.Sequential(
            nn.Conv2d(channels, 16, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * (rows - 2) * (cols - 2), features_dim),
            nn.ReLU(),
        )

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations.float())


def make_minatar() -> gym.Env:
    """MinAtar Breakout as examples/configs/dqn_minatar.yaml plays it."""
    from minatar_env import make_minatar_env

    return make_minatar_env("breakout", sticky_action_prob=0.1, difficulty_ramping=True, max_episode_steps=2000)


def atari_envs(n_envs: int, seed: int, sticky: float) -> VecEnv:
    """``n_envs`` Pong copies through SB3's AtariWrapper, 4 frames to a stack, ALE's sticky actions at ``sticky``."""
    env_kwargs = dict(frameskip=1, repeat_action_probability=sticky)
    return VecFrameStack(make_atari_env(PONG, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs), n_stack=4)


def zoo_options(algo: str, env: str, budget: int, learning_starts: Optional[int]) -> Dict[str, Any]:
    """The zoo's constructor options for ``algo`` on ``env`` (benchmarks/sb3_zoo.json) in a run of ``budget``
    action steps: exploration ends after as many steps as in the zoo's run, and ``learning_starts``, when
    given, replaces the zoo's."""
    setup = ZOO[algo, env]
    options = dict(setup.options)
    if "exploration_fraction" in options:
        options["exploration_fraction"] = options["exploration_fraction"] * setup.budget / budget
    if learning_starts is not None:
        options["learning_starts"] = learning_starts
    return options


def dqn_atari(seed: int, budget: int, learning_starts: Optional[int]) -> Tuple[BaseAlgorithm, None]:
    options = zoo_options("dqn", "atari", budget, learning_starts)
    return DQN("CnnPolicy", atari_envs(1, seed, sticky=0.25), seed=seed, device="cpu", verbose=0, **options), None


def sac_halfcheetah(seed: int, budget: int, learning_starts: Optional[int]) -> Tuple[BaseAlgorithm, str]:
    env = make_vec_env("HalfCheetah-v5", n_envs=1, seed=seed)
    options = zoo_options("sac", "HalfCheetah-v5", budget, learning_starts)
    return SAC("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **options), "HalfCheetah-v5"


def ppo_atari(seed: int, budget: int, learning_starts: Optional[int]) -> Tuple[BaseAlgorithm, None]:
    envs = atari_envs(ZOO["ppo", "atari"].n_envs, seed, sticky=0.0)
    options = zoo_options("ppo", "atari", budget, None)  # PPO has no warm-up
    return PPO("CnnPolicy", envs, seed=seed, device="cpu", verbose=0, **options), None


def dqn_minatar(seed: int, budget: int, learning_starts: Optional[int]) -> Tuple[BaseAlgorithm, Callable[[], gym.Env]]:
    env = make_vec_env(make_minatar, n_envs=1, seed=seed)
    options = dict(
        buffer_size=100_000,
        learning_rate=1e-3,
        batch_size=32,
        learning_starts=1_000 if learning_starts is None else learning_starts,
        gamma=0.99,
        target_update_interval=1_000,  # env steps: the config's 250 updates at one per 4 steps
        train_freq=4,
        gradient_steps=1,
        n_steps=3,
        exploration_initial_eps=1.0,
        exploration_final_eps=0.05,
        exploration_fraction=10_000 / budget,
        max_grad_norm=10.0,
        policy_kwargs=dict(features_extractor_class=MinAtarCNN, net_arch=[]),
    )
    return DQN("CnnPolicy", env, seed=seed, device="cpu", verbose=0, **options), make_minatar


#: workload -> a function of (seed, budget, learning_starts or None for the default) making the model and
#: the environment its greedy evaluation plays (None: no evaluation on that workload).
WORKLOADS: Dict[str, Callable[[int, int, Optional[int]], Tuple[BaseAlgorithm, Any]]] = {
    "dqn-atari": dqn_atari,
    "sac-halfcheetah": sac_halfcheetah,
    "ppo-atari": ppo_atari,
    "dqn-minatar": dqn_minatar,
}


class Clock(BaseCallback):
    """The wall and process CPU time of ``learn()``, and the episodes it finished."""

    def __init__(self) -> None:
        super().__init__()
        self.start = self.stop = self.cpu_start = self.cpu_stop = 0.0
        self.episodes = 0

    def _on_training_start(self) -> None:
        self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def _on_step(self) -> bool:
        self.episodes += sum("episode" in info for info in self.locals["infos"])
        return True

    def _on_training_end(self) -> None:
        self.stop, self.cpu_stop = time.perf_counter(), time.process_time()


def run(workload: str, seed: int, budget: int, learning_starts: Optional[int], eval_episodes: int) -> Dict[str, Any]:
    """Train ``workload`` for ``budget`` action steps; the result of benchmarks/sb3_workloads.py's ``RESULT`` line.

    Raises:
        ValueError: ``eval_episodes`` asked of a workload SB3's side cannot evaluate here (Atari).
    """
    cpu_start = time.process_time()
    model, eval_env = WORKLOADS[workload](seed, budget, learning_starts)
    if eval_episodes and eval_env is None:
        raise ValueError(f"{workload}: no greedy evaluation on this workload")
    clock = Clock()
    model.learn(total_timesteps=budget, callback=clock)
    result: Dict[str, Any] = {
        "seed": seed,
        "env_steps": int(model.num_timesteps),
        "updates": int(model._n_updates),
        "episodes": clock.episodes,
        "train_seconds": clock.stop - clock.start,
        "run_cpu_seconds": clock.cpu_stop - clock.cpu_start,
        "budget": budget,
    }
    if isinstance(model, PPO):
        # SB3 counts PPO's epochs; parl counts the rollouts learned: updates are those, with the gradient steps.
        minibatches = -(-model.n_steps * model.n_envs // model.batch_size)
        result["updates"] = int(model._n_updates // model.n_epochs)
        result["gradient_steps"] = int(model._n_updates * minibatches)
    if eval_episodes:
        returns: List[float] = evaluate(model, eval_env, eval_episodes, final_seed(seed))
        result["greedy_mean_return"] = float(np.mean(returns))
    result["cpu_seconds"] = time.process_time() - cpu_start
    return result


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, required=True, help="action steps, all environments together")
    parser.add_argument("--learning-starts", type=int, default=None, help="steps before learning (default: the zoo's)")
    parser.add_argument("--eval-episodes", type=int, default=0, help="greedy episodes after training (0: none)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (parl uses one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = run(args.workload, args.seed, args.budget, args.learning_starts, args.eval_episodes)
    result["torch_threads"] = args.threads
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
