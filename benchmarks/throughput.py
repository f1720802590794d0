"""Env steps per second of in-process agents, beside the single-loop ceiling, in one run.

    python benchmarks/throughput.py [--agents 1 8 32 128] [--modes threads cooperative] [--seconds 4]

Every row steps CartPole-v1 and picks actions with the same 64-64 MLP
(DQN's greedy predict). The ceiling steps 32 environments in one plain loop
with one batched forward per step, on the core the Manager gives its agents;
each in-process row runs N agents under a Manager ``placement`` ("threads": one thread per agent, batched by the
wrapper's prediction thread; "cooperative": greenlets in one scheduler
thread), each agent calling ``helper.predict`` per step, so the ratio is what
the framework costs. No learning happens in any row.

The machine's speed drifts between seconds when other jobs share it, so each
row is measured in slices, each right after a slice of the ceiling (the row's
agents paused meanwhile), and the median of the per-pair ratios is printed,
by wall-clock time and by this process's CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List, NamedTuple, Optional, Set

import gymnasium as gym
import numpy as np

import parl
from parl import affinity
from parl.algorithms import DQN
from parl.models import MLPQModel
from parl.runtime import registry

ENV_ID = "CartPole-v1"
CEILING_ENVS = 32
#: Slices per row, each paired with a ceiling slice.
SLICES = 4


def algorithm_func():
    return parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(64, 64)), DQN, {})()


class Rate(NamedTuple):
    """One measurement: env steps per wall-clock second, this process's CPU time per step, and the
    mean prediction batch."""

    steps_per_s: float
    cpu_us_per_step: float
    mean_batch: float


class Ceiling:
    """CEILING_ENVS envs in one loop with one batched forward per step, measured in slices on
    ``cpus`` (the core the Manager gives its agents, so both sides of a ratio run on the same core;
    None: wherever the OS puts it)."""

    def __init__(self, cpus: Optional[Set[int]]) -> None:
        self.task = parl.ComputationTask("ceiling", algorithm_func())
        self.envs = [gym.make(ENV_ID) for _ in range(CEILING_ENVS)]
        self.obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(self.envs)])
        self.cpus = cpus

    def measure(self, seconds: float) -> Rate:
        if not self.cpus:
            return self._measure(seconds)
        allowed = os.sched_getaffinity(0)
        affinity.pin_current_thread(self.cpus)
        try:
            return self._measure(seconds)
        finally:
            os.sched_setaffinity(0, allowed)  # the worker rows fork from this thread: give it every core back

    def _measure(self, seconds: float) -> Rate:
        task, envs, obs = self.task, self.envs, self.obs
        steps, start, cpu = 0, time.perf_counter(), time.process_time()
        while True:
            actions, _ = task.predict({"obs": obs}, {})
            for i, env in enumerate(envs):
                o, _, terminated, truncated, _ = env.step(int(actions["action"][i, 0]))
                obs[i] = env.reset()[0] if terminated or truncated else o
            steps += CEILING_ENVS
            if steps % (CEILING_ENVS * 16) == 0 and time.perf_counter() - start >= seconds:
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
                return Rate(steps / elapsed, cpu / steps * 1e6, float(CEILING_ENVS))


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


class Row(NamedTuple):
    """An in-process row: medians over its slices, and of the ratios to the ceiling slice beside each."""

    rate: Rate
    of_ceiling: float
    of_ceiling_cpu: float


def in_process(
    num_agents: int, seconds: float, placement: str, thread_placement: str, top: Ceiling, slices: List[Rate]
) -> Row:
    """``num_agents`` agents placed by ``placement``, each predicting through its helper per step.

    The machine's speed drifts (other tenants), so the time is cut into slices, each paired with a
    slice of the ceiling measured just before it while the agents are paused; the ratio of each
    pair is taken, and the median reported. The ceiling's slices are added to ``slices``.
    """
    manager = parl.Manager(
        {"RL": parl.TaskSettings(algorithm_func, batching=parl.Batching(max_batchsize=256))},
        placement=placement,
        thread_placement=thread_placement,
    )
    agents = [SteppingAgent(gym.make(ENV_ID), seed=i) for i in range(num_agents)]
    for agent in agents:
        manager.add_agent(agent, {"RL": PredictOnlyHelper()})
    stats = manager.wrappers["RL"].stats
    rates, ratios, cpu_ratios = [], [], []
    manager.start()
    try:
        time.sleep(min(1.0, seconds / 4))  # warm-up
        for _ in range(SLICES):
            manager.pause()
            time.sleep(0.05)  # let a batch under way finish
            ceiling = top.measure(seconds / SLICES)
            slices.append(ceiling)
            manager.resume()
            time.sleep(0.05)
            steps0, batches0, preds0 = sum(a.steps for a in agents), stats.prediction_batches, stats.predictions
            start, cpu = time.perf_counter(), time.process_time()
            time.sleep(seconds / SLICES)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            steps = sum(a.steps for a in agents) - steps0
            batches = stats.prediction_batches - batches0
            rate = Rate(steps / elapsed, cpu / max(steps, 1) * 1e6, (stats.predictions - preds0) / max(batches, 1))
            rates.append(rate)
            ratios.append(rate.steps_per_s / ceiling.steps_per_s)
            cpu_ratios.append(ceiling.cpu_us_per_step / rate.cpu_us_per_step)
    finally:
        manager.stop()
    return Row(_median_rate(rates), statistics.median(ratios), statistics.median(cpu_ratios))


def _median_rate(rates: List[Rate]) -> Rate:
    return Rate(*(statistics.median(values) for values in zip(*rates)))


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["threads", "cooperative"],
        choices=registry.names(),
        help="Manager placements of the in-process rows",
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="measuring time per row (and as much for the ceiling)"
    )
    parser.add_argument(
        "--thread-placement", default="one_core", choices=affinity.PLACEMENTS, help="Manager thread_placement"
    )
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="worker-process rows (none: skip)")
    parser.add_argument("--worker-agents", type=int, default=8, help="agents in all in the worker-process rows")
    parser.add_argument("--worker-repeats", type=int, default=3, help="alternations of the worker-process rows")
    args = parser.parse_args(argv)

    top = Ceiling(affinity.plan(args.thread_placement)[0])
    top.measure(1.0)  # warm-up
    slices: List[Rate] = []
    rows = []
    for mode in args.modes:
        for n in args.agents:
            rows.append(
                (f"in-process: {mode}", n, in_process(n, args.seconds, mode, args.thread_placement, top, slices))
            )
    ceiling = _median_rate(slices)
    rows.insert(0, ("ceiling: 1 loop, batched forward", CEILING_ENVS, Row(ceiling, 1.0, 1.0)))
    print(
        f"{'mode':<36} {'envs':>5} {'env steps/s':>12} {'us/step':>8} {'mean batch':>11} {'of ceiling':>11}"
        f" {'CPU us/step':>12} {'of ceiling (CPU)':>17}"
    )
    for mode, n, row in rows:
        r = row.rate
        print(
            f"{mode:<36} {n:>5} {r.steps_per_s:>12,.0f} {1e6 / r.steps_per_s:>8.1f} {r.mean_batch:>11.1f}"
            f" {row.of_ceiling:>11.2f} {r.cpu_us_per_step:>12.1f} {row.of_ceiling_cpu:>17.2f}"
        )
    print(
        f"medians over {SLICES} slices per row; each ratio is to a slice of the ceiling measured just before "
        f"(ceiling slices: {min(s.steps_per_s for s in slices):,.0f}-{max(s.steps_per_s for s in slices):,.0f} "
        "env steps/s)"
    )
    if args.workers:
        print_worker_rows(args.workers, args.worker_agents, args.seconds, args.worker_repeats)


def print_worker_rows(workers: List[int], agents: int, seconds: float, repeats: int) -> None:
    """Agents in worker processes on CartPole whose step burns 1 ms of CPU: env steps/s per worker
    count (median of ``repeats`` alternations) and the ratio to the fewest workers."""
    from slow_env import worker_rows  # it imports this module's network: imported here, not at the top

    rates: Dict[int, List[float]] = {n: [] for n in workers}
    batches: Dict[int, List[float]] = {n: [] for n in workers}
    for _ in range(repeats):
        for n in workers:
            ((_, _, steps_per_s, mean_batch),) = worker_rows((n,), agents, seconds)
            rates[n].append(steps_per_s)
            batches[n].append(mean_batch)
    base = float(np.median(rates[min(workers)]))
    print()
    print(f"{'mode':<36} {'agents':>6} {'env steps/s':>12} {'mean batch':>11} {'of 1 worker':>12}  runs")
    for n in workers:
        rate = float(np.median(rates[n]))
        runs = ", ".join(f"{r:,.0f}" for r in rates[n])
        print(
            f"{'worker processes: ' + str(n) + ' (1 ms env)':<36} {agents:>6} {rate:>12,.0f}"
            f" {float(np.median(batches[n])):>11.1f} {rate / base:>12.2f}  {runs}"
        )


if __name__ == "__main__":
    main()
