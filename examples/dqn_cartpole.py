"""DQN on CartPole-v1 with 8 agents as threads feeding one ComputationTask.

    python examples/dqn_cartpole.py [--agents 8] [--seed 0] [--max-steps 150000]

Trains until a greedy 10-episode evaluation reaches the target return (or the
step budget runs out), printing progress, then prints a final greedy
10-episode evaluation on fresh seeds.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Dict, List, Optional

import gymnasium as gym
import numpy as np

import parl
from parl.algorithms import DQN
from parl.models import MLPQModel
from parl.utils import LinearSchedule, evaluate

ENV_ID = "CartPole-v1"


class EpsilonGreedyAgent(parl.Agent):
    """Acts randomly with probability epsilon (decaying over this agent's steps), greedily otherwise."""

    def __init__(self, env: gym.Env, *, epsilon: LinearSchedule, seed: int) -> None:
        super().__init__(env, seed=seed)
        self.epsilon = epsilon
        self.steps = 0
        self.rng = random.Random(seed)

    def run_one_episode(self) -> Dict[str, float]:
        rl = self.helpers["RL"]
        obs, _ = self.reset_env()
        total, steps, done = 0.0, 0, False
        while not done:
            if self.rng.random() < self.epsilon(self.steps):
                actions = {"action": np.array([self.env.action_space.sample()], dtype=np.int64)}
            else:
                actions, _ = rl.predict({"obs": obs})
            next_obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
            rl.store_data({"obs": obs}, actions, reward, {"obs": next_obs}, terminated, truncated)
            rl.learn()
            obs = next_obs
            total += reward
            steps += 1
            self.steps += 1
            done = terminated or truncated
        return {"reward": total, "steps": steps}


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=150_000, help="env step budget for training")
    parser.add_argument("--target", type=float, default=475.0, help="greedy mean return that ends training")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--quiet", action="store_true", help="print only the final result")
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> Dict[str, float]:
    """Train, then evaluate; returns the figures the script prints."""
    parl.seed_everything(args.seed)
    algorithm_func = parl.create_algorithm_func(
        MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(128, 128)),
        DQN, dict(gamma=0.99, learning_rate=1e-3, target_update_interval=100),
    )
    manager = parl.Manager({"RL": parl.TaskSettings(algorithm_func, max_batchsize=64)})
    for i in range(args.agents):
        agent = EpsilonGreedyAgent(
            make_env(), epsilon=LinearSchedule(1.0, 0.02, 2_000), seed=args.seed * 1000 + i
        )
        helper = parl.ExpReplayHelper(capacity=20_000, batch_size=32, warmup_steps=250, sample_interval=2,
                                      seed=args.seed * 1000 + i)
        manager.add_agent(agent, {"RL": helper})
    task = manager.tasks["RL"]
    evaluator = parl.ComputationTask("eval", algorithm_func())

    start = time.perf_counter()
    manager.start()
    steps, recent, last_print, last_eval_steps, check = 0, [], start, 0, float("nan")
    try:
        while manager.running() and steps < args.max_steps:
            time.sleep(0.1)
            for episode in manager.new_episodes():
                steps += int(episode["steps"])
                recent = (recent + [episode["reward"]])[-20:]
            if manager.errors:
                raise manager.errors[0]
            mean_recent = float(np.mean(recent)) if recent else 0.0
            now = time.perf_counter()
            if not args.quiet and now - last_print >= 2.0:
                last_print = now
                print(f"[{now - start:6.1f}s] steps {steps:7d}  updates {task.update_steps:6d}  "
                      f"recent mean return {mean_recent:6.1f}  last greedy check {check:6.1f}", flush=True)
            if mean_recent >= 0.8 * args.target and steps - last_eval_steps >= 2_000:
                last_eval_steps = steps
                evaluator.set_algorithm_weights(task.algorithm_weights())
                check = float(np.mean(evaluate(evaluator, make_env, args.eval_episodes, seed=10_000 + steps)))
                if check >= args.target:
                    break
    finally:
        manager.stop()
    train_seconds = time.perf_counter() - start
    returns = evaluate(evaluator, make_env, args.eval_episodes, seed=1_000_000 + args.seed)
    result = {"train_seconds": train_seconds, "env_steps": steps, "updates": task.update_steps,
              "greedy_mean_return": float(np.mean(returns))}
    print(f"trained {steps} env steps, {task.update_steps} updates in {train_seconds:.1f} s")
    print(f"greedy {args.eval_episodes}-episode mean return: {result['greedy_mean_return']:.1f}")
    return result


if __name__ == "__main__":
    outcome = train(parse_args())
    sys.exit(0 if outcome["greedy_mean_return"] >= 0 else 1)
