"""Seconds per PPO update of one large batch: one task in this process, and one task split between K
learner processes (parl.runtime.learner_processes, gradients summed by paddle.distributed).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/learners.py --learners 1 2
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/learners.py --alone      # this process only (any parl)

The batch: ``--rows`` rows (segments of 128) of 64 observations, 4 actions, a 256x256 actor and critic,
4 epochs of 4 minibatches. Each learner runs the no-gradient pass over the whole batch (old
log-probabilities, values, advantages) and the forward and backward passes of its share of every
minibatch, so K learners on K free cores take about ``(1 + 3 * 4 / K) / (1 + 3 * 4)`` of one learner's
compute per update, plus one ``all_reduce`` per minibatch and the batch's trip to every learner.
Wall-clock time per update, median of ``--updates`` after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, List

import numpy as np

import parl
from parl.algorithms.ppo import PPO
from parl.core.batch import Transition
from parl.models import MLPActorCritic
from parl.seeding import seed_everything

OBS, ACTIONS, SEGMENT = 64, 4, 128


def make_task() -> parl.ComputationTask:
    model = lambda: MLPActorCritic(OBS, num_actions=ACTIONS, hidden_sizes=(256, 256))  # noqa: E731
    return parl.ComputationTask("ppo", PPO(model, epochs=4, num_minibatches=4))


def make_batch(rows: int, seed: int = 0) -> Transition[np.ndarray]:
    """``rows`` random steps in segments of ``SEGMENT``; each row's next observation is the next row's."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((rows + 1, OBS)).astype(np.float32)
    actions = rng.integers(0, ACTIONS, (rows, 1)).astype(np.int64)
    rewards = rng.standard_normal((rows, 1)).astype(np.float32)
    ends = np.zeros((rows, 1), np.float32)
    lengths = (SEGMENT,) * (rows // SEGMENT)
    return Transition(
        {"obs": obs[:-1]}, {"action": actions}, {"reward": rewards}, {"obs": obs[1:]}, ends, {}, {}, lengths
    )


def seconds_per_update(learn: Callable[[Transition[np.ndarray]], object], rows: int, updates: int) -> float:
    batch = make_batch(rows)
    learn(batch)  # builds the layers and the optimizer
    times: List[float] = []
    for _ in range(updates):
        start = time.perf_counter()
        learn(batch)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--learners", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--alone", action="store_true", help="only the task in this process")
    args = parser.parse_args()
    seed_everything(0)
    task = make_task()
    print(f"in this process: {seconds_per_update(task.learn, args.rows, args.updates):.3f} s/update")
    if args.alone:
        return
    from parl.runtime.learner_processes import LearnerProcesses

    for count in args.learners:
        with LearnerProcesses(make_task, count=count, seed=0) as learners:
            seconds = seconds_per_update(learners.learn, args.rows, args.updates)
        print(f"{count} learner process(es): {seconds:.3f} s/update")


if __name__ == "__main__":
    main()
