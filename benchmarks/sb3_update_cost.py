"""Stable-Baselines3's side of benchmarks/update_cost.py: milliseconds per ``train()`` step.

    .venv-sb3/bin/python benchmarks/sb3_update_cost.py --workload dqn-atari --rounds 7 --updates 5

Runs in the ``.venv-sb3`` virtualenv (``make .venv-sb3``); imports neither parl nor paddle. The model
is SB3's own (``CnnPolicy`` DQN on Atari-shaped frames, ``MlpPolicy`` SAC 256x256 on HalfCheetah-v5's
sizes), on a stand-in environment of the same spaces, with its replay buffer warmed by ``learn()``;
each timed step is ``model.train(gradient_steps=1, batch_size=...)``: a replay sample and one update,
as one update of SB3's training loop. Prints one line ``RESULT {json}`` with the thread-CPU
milliseconds of every step, by round.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Dict, List

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import DQN, SAC


class StandIn(gym.Env):
    """An environment with the given spaces whose observations are random (the update's cost does not
    depend on them)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def dqn_atari() -> DQN:
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    env = StandIn(frames, gym.spaces.Discrete(6))
    return DQN("CnnPolicy", env, buffer_size=5_000, learning_starts=1_000, batch_size=32, device="cpu", verbose=0)


def sac_halfcheetah() -> SAC:
    env = StandIn(gym.spaces.Box(-np.inf, np.inf, (17,), np.float32), gym.spaces.Box(-1, 1, (6,), np.float32))
    arch = dict(net_arch=[256, 256])
    return SAC("MlpPolicy", env, buffer_size=5_000, learning_starts=1_000, batch_size=256, policy_kwargs=arch,
               device="cpu", verbose=0)  # fmt: skip


WORKLOADS = {"dqn-atari": (dqn_atari, 32), "sac-halfcheetah": (sac_halfcheetah, 256)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=5, help="timed train() steps per round")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (parl uses one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    make, batch_size = WORKLOADS[args.workload]
    model = make()
    model.learn(1_100)  # fills the buffer past learning_starts (a few updates on the way warm up torch)
    rounds: List[List[float]] = []
    for _ in range(args.rounds):
        times = []
        for _ in range(args.updates):
            start = time.thread_time()
            model.train(gradient_steps=1, batch_size=batch_size)
            times.append((time.thread_time() - start) * 1e3)
        rounds.append(times)
    result: Dict[str, object] = {"workload": args.workload, "torch": torch.__version__, "ms": rounds}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
