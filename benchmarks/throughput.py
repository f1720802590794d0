"""Env steps per second through the ComputationWrapper, beside the single-loop ceiling.

    python benchmarks/throughput.py [--agents 1 8 32] [--seconds 4] [--placement one_core]

Every row steps CartPole-v1 and picks actions with the same 64-64 MLP
(DQN's greedy predict). The ceiling steps 32 environments in one plain loop
with one batched forward per step; the wrapper rows run N agent threads that
each call ``helper.predict`` per step, so the ratio is what batching through
threads costs. No learning happens in either.
"""

from __future__ import annotations

import argparse
import time
from typing import Dict, List

import gymnasium as gym
import numpy as np

import parl
from parl.algorithms import DQN
from parl.framework.affinity import PLACEMENTS
from parl.models import MLPQModel

ENV_ID = "CartPole-v1"
CEILING_ENVS = 32


def algorithm_func():
    return parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(64, 64)), DQN, {})()


def ceiling(seconds: float) -> float:
    """Env steps/s of CEILING_ENVS envs in one loop with one batched forward per step."""
    task = parl.ComputationTask("ceiling", algorithm_func())
    envs = [gym.make(ENV_ID) for _ in range(CEILING_ENVS)]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])
    steps, start = 0, time.perf_counter()
    while True:
        actions, _ = task.predict({"obs": obs}, {})
        for i, env in enumerate(envs):
            o, _, terminated, truncated, _ = env.step(int(actions["action"][i, 0]))
            obs[i] = env.reset()[0] if terminated or truncated else o
        steps += CEILING_ENVS
        if steps % (CEILING_ENVS * 64) == 0 and time.perf_counter() - start >= seconds:
            return steps / (time.perf_counter() - start)


class SteppingAgent(parl.Agent):
    """Predicts through its helper and steps; counts steps for the harness."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        super().__init__(env, seed=seed)
        self.steps = 0

    def run_one_episode(self) -> Dict[str, float]:
        rl = self.helpers["RL"]
        obs, _ = self.reset_env()
        done, n = False, 0
        while not done:
            actions, _ = rl.predict({"obs": obs})
            obs, _, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
            done = terminated or truncated
            n += 1
            self.steps += 1
        return {"reward": float(n), "steps": n}


class PredictOnlyHelper(parl.AgentHelper):
    """A helper that never learns (the harness measures acting only)."""

    def _store(self, transition, episode_over):  # pragma: no cover - never called
        pass

    def learn(self):
        return None


def through_wrapper(num_agents: int, seconds: float, thread_placement: str) -> Dict[str, float]:
    """Env steps/s and mean prediction batch size with ``num_agents`` agent threads."""
    manager = parl.Manager(
        {"RL": parl.TaskSettings(algorithm_func, max_batchsize=256)}, thread_placement=thread_placement
    )
    agents = [SteppingAgent(gym.make(ENV_ID), seed=i) for i in range(num_agents)]
    for agent in agents:
        manager.add_agent(agent, {"RL": PredictOnlyHelper()})
    stats = manager.wrappers["RL"].stats
    manager.start()
    try:
        time.sleep(min(1.0, seconds / 4))  # warm-up
        steps0, batches0, preds0 = sum(a.steps for a in agents), stats.prediction_batches, stats.predictions
        start = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - start
        steps = sum(a.steps for a in agents) - steps0
        batches = stats.prediction_batches - batches0
        mean_batch = (stats.predictions - preds0) / max(batches, 1)
    finally:
        manager.stop()
    return {"steps_per_s": steps / elapsed, "mean_batch": mean_batch}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per row")
    parser.add_argument("--placement", default="one_core", choices=PLACEMENTS, help="Manager thread_placement")
    args = parser.parse_args(argv)

    top = ceiling(args.seconds)
    rows = [("ceiling: 1 loop, batched forward", CEILING_ENVS, top, float(CEILING_ENVS))]
    for n in args.agents:
        r = through_wrapper(n, args.seconds, args.placement)
        rows.append((f"wrapper: agent threads ({args.placement})", n, r["steps_per_s"], r["mean_batch"]))
    print(f"{'mode':<36} {'envs':>5} {'env steps/s':>12} {'mean batch':>11} {'of ceiling':>11}")
    for mode, n, rate, batch in rows:
        print(f"{mode:<36} {n:>5} {rate:>12,.0f} {batch:>11.1f} {rate / top:>11.2f}")


if __name__ == "__main__":
    main()
