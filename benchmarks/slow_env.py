"""Slow environments, and worker processes with an environment whose step costs about 1 ms of CPU.

    python benchmarks/slow_env.py [--workers 1 2] [--agents 8] [--seconds 4] [--repeats 3]

:class:`BusyCartPole` is CartPole-v1 whose ``step`` first burns ``burn_seconds``
of this thread's CPU time in a busy loop (CPU time, not wall time, so a step
costs the same work however the OS schedules it). :class:`SleepingEnv` has
CartPole's spaces and episodes of a fixed length, and sleeps at every step
(benchmarks/ray_scaling.py). :func:`through_workers`
runs a robot with ``placement="processes"`` over such environments and
measures env steps per second; benchmarks/throughput.py prints its rows
("worker processes at 1 and 2 with the 1 ms environment") and their ratio.

Every step is one prediction served by the parent's wrapper (the same 64-64
MLP as the other throughput rows), so the rate is read from the wrapper's
counters: nothing has to be counted inside the workers. No learning happens.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import parl  # noqa: E402

ENV_ID = "CartPole-v1"
#: CPU seconds each step of :class:`BusyCartPole` burns.
BURN_SECONDS = 0.001


class BusyCartPole(gym.Wrapper):
    """CartPole whose every step first burns ``burn_seconds`` of CPU (a stand-in for a costly simulator)."""

    def __init__(self, env: gym.Env, burn_seconds: float = BURN_SECONDS) -> None:
        super().__init__(env)
        self.burn_seconds = burn_seconds

    def step(self, action: Any):
        end = time.thread_time() + self.burn_seconds
        while time.thread_time() < end:
            pass
        return self.env.step(action)


def make_busy_env(burn_seconds: float = BURN_SECONDS) -> gym.Env:
    return BusyCartPole(gym.make(ENV_ID), burn_seconds)


class SleepingEnv(gym.Env):
    """An environment with CartPole's spaces whose every step sleeps ``sleep_seconds`` of wall time
    (a simulator or a robot that answers late, costing this process no CPU meanwhile).

    Every episode lasts ``episode_steps`` steps (truncated, never terminated) and every reward is 1,
    whatever the actions, so the work per env step stays the same however well a policy learns:
    throughput measured early or late in a run is the same. Observations are small random numbers.
    """

    def __init__(self, sleep_seconds: float = 0.005, episode_steps: int = 200) -> None:
        cartpole = gym.make(ENV_ID)
        self.observation_space = cartpole.observation_space
        self.action_space = cartpole.action_space
        cartpole.close()
        self.sleep_seconds = sleep_seconds
        self.episode_steps = episode_steps
        self._steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._steps = 0
        return self._observation(), {}

    def step(self, action: Any):
        time.sleep(self.sleep_seconds)
        self._steps += 1
        return self._observation(), 1.0, False, self._steps >= self.episode_steps, {}

    def _observation(self) -> np.ndarray:
        return self.np_random.uniform(-0.05, 0.05, size=4).astype(np.float32)


def through_workers(workers: int, agents: int, seconds: float, burn_seconds: float = BURN_SECONDS) -> Dict[str, float]:
    """Env steps/s and mean prediction batch with ``agents`` agents spread over ``workers`` processes.

    Returns ``steps_per_s``, ``mean_batch`` and ``seconds`` (the measured interval, after a warm-up).
    """
    from throughput import PredictOnlyHelper, SteppingAgent, algorithm_func  # this directory

    manager = parl.Manager(
        {"RL": parl.TaskSettings(algorithm_func, batching=parl.Batching(max_batchsize=256))},
        placement=parl.ProcessesOptions(workers=workers),
    )
    for i in range(agents):
        manager.add_agent(SteppingAgent(make_busy_env(burn_seconds), seed=i), {"RL": PredictOnlyHelper()})
    stats = manager.wrappers["RL"].stats
    manager.start()
    try:
        time.sleep(min(1.0, seconds / 4))  # warm-up: the forks, the first forwards
        batches0, steps0 = stats.prediction_batches, stats.predictions
        start = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - start
        steps, batches = stats.predictions - steps0, stats.prediction_batches - batches0
        if manager.errors:
            raise manager.errors[0]
    finally:
        manager.stop()
    return {"steps_per_s": steps / elapsed, "mean_batch": steps / max(batches, 1), "seconds": elapsed}


def worker_rows(
    workers: Sequence[int] = (1, 2), agents: int = 8, seconds: float = 4.0
) -> List[Tuple[str, int, float, float]]:
    """``(mode, agents, env steps/s, mean batch)`` per worker count, as throughput.py tables them."""
    rows = []
    for n in workers:
        r = through_workers(n, agents, seconds)
        rows.append((f"worker processes: {n} (1 ms env)", agents, r["steps_per_s"], r["mean_batch"]))
    return rows


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--agents", type=int, default=8, help="agents in all, spread over the workers")
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per row")
    parser.add_argument("--repeats", type=int, default=1, help="alternate the rows this many times")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPUs; {args.agents} agents; {BURN_SECONDS * 1e3:.1f} ms of CPU per env step")
    rates: Dict[int, List[float]] = {n: [] for n in args.workers}
    for repeat in range(args.repeats):
        for n in args.workers:
            r = through_workers(n, args.agents, args.seconds)
            rates[n].append(r["steps_per_s"])
            print(f"  run {repeat}: workers {n}: {r['steps_per_s']:8.0f} env steps/s, mean batch {r['mean_batch']:.2f}")
    base = min(args.workers)
    for n in args.workers:
        ratios = [rate / base_rate for rate, base_rate in zip(rates[n], rates[base])]
        print(
            f"workers {n}: median {statistics.median(rates[n]):8.0f} env steps/s; ratio to {base} worker(s) "
            f"per run {[round(r, 2) for r in ratios]}, median {statistics.median(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
