"""Per-call cost of ComputationTask.predict: the plain path against the fast path.

The plain path calls ``Algorithm.predict`` on new tensors under ``paddle.no_grad()``; the fast path calls
the algorithm's compiled predictor (``Algorithm.compile_predict``) on the task's refilled tensors
(``parl/layers/tensors.py``).

    taskset -c 1 python benchmarks/predict_path.py [--batches 1 8 32 128 256] [--normalize] [--repeats 7]
        [--tasks dqn ppo ppo-gaussian ppo-lstm sac] [--deterministic]

Rows: by default DQN over a 64-64 MLPQModel (CartPole sizes: 4 inputs, 2
actions) and PPO over a 64-64 MLPActorCritic (discrete, same sizes), sampled
actions; ``--tasks`` adds PPO over a Gaussian MLPActorCritic (2 action
dimensions) or a 64-unit LSTMActorCritic, and SAC over a 256-256
GaussianActorCritic; ``--deterministic`` asks for greedy or mean actions. For each
batch size the two paths alternate in ``--repeats`` rounds of a fixed number of
calls; the table gives the median microseconds per call of each path, the
share the fast path saves, and the fastest round of each (on a shared machine
the minimum is the steadier figure). Both paths give the same actions, bit for bit
(tests/test_fast_predict.py). ``--train`` adds one DQN update (batch 64) and
one PPO update (one 128-row batch, default epochs and minibatches).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List, Sequence

import numpy as np

import parl
from parl.algorithms import DQN, PPO, SAC
from parl.models import GaussianActorCritic, LSTMActorCritic, MLPActorCritic, MLPQModel

OBS_DIM, NUM_ACTIONS, ACTION_DIM = 4, 2, 2

#: --tasks name -> (row label, model class, model arguments, algorithm class).
TASKS = {
    "dqn": ("DQN MLPQModel", MLPQModel, dict(obs_dim=OBS_DIM, num_actions=NUM_ACTIONS), DQN),
    "ppo": ("PPO MLPActorCritic", MLPActorCritic, dict(obs_dim=OBS_DIM, num_actions=NUM_ACTIONS), PPO),
    "ppo-gaussian": ("PPO MLP Gaussian", MLPActorCritic, dict(obs_dim=OBS_DIM, action_dim=ACTION_DIM), PPO),
    "ppo-lstm": ("PPO LSTMActorCritic", LSTMActorCritic, dict(obs_dim=OBS_DIM, num_actions=NUM_ACTIONS), PPO),
    "sac": ("SAC GaussianAC", GaussianActorCritic, dict(obs_dim=OBS_DIM, action_dim=ACTION_DIM), SAC),
}


def make_task(kind: str, normalize: bool) -> parl.ComputationTask:
    label, model_class, model_args, algorithm_class = TASKS[kind]
    func = parl.create_algorithm_func(model_class, model_args, algorithm_class, {})
    return parl.ComputationTask(label, func(), normalize_inputs=normalize)


def per_call_us(fn: Callable[[], object], seconds: float = 0.02) -> Callable[[], float]:
    """A round timer: calls ``fn`` for a fixed count (sized to ~``seconds``) and returns us per call."""
    for _ in range(50):
        fn()
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        fn()
        n += 1

    def round_() -> float:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) / n * 1e6

    return round_


def predict_rows(batches: List[int], normalize: bool, repeats: int, kinds: Sequence[str], deterministic: bool) -> None:
    print(f"{'task':<19} {'batch':>5} {'plain us':>9} {'fast us':>8} {'saved':>6}   {'(min: plain':>11} {'fast)':>6}")
    rng = np.random.default_rng(0)
    for kind in kinds:
        task = make_task(kind, normalize)
        label = task.name
        for batch in batches:
            inputs = {"obs": rng.standard_normal((batch, OBS_DIM)).astype(np.float32)}
            states = task.initial_states(batch)
            timers = {}
            for fast in (False, True):
                task.fast_predict = fast
                timers[fast] = per_call_us(
                    lambda task=task, inputs=inputs, states=states: task.predict(
                        inputs, states, deterministic=deterministic
                    )
                )
            samples: Dict[bool, List[float]] = {False: [], True: []}
            for _ in range(repeats):
                for fast in (False, True):
                    task.fast_predict = fast
                    samples[fast].append(timers[fast]())
            plain, fast_us = statistics.median(samples[False]), statistics.median(samples[True])
            print(
                f"{label:<19} {batch:>5} {plain:>9.1f} {fast_us:>8.1f} {1 - fast_us / plain:>6.0%}   "
                f"{min(samples[False]):>11.1f} {min(samples[True]):>6.1f}",
                flush=True,
            )


def train_rows(repeats: int) -> None:
    rng = np.random.default_rng(0)

    def batch(rows: int, dqn: bool) -> parl.Transition:
        obs = rng.standard_normal((rows, OBS_DIM)).astype(np.float32)
        return parl.Transition(
            inputs={"obs": obs},
            next_inputs={"obs": rng.standard_normal((rows, OBS_DIM)).astype(np.float32)},
            states={},
            next_states={},
            actions={"action": rng.integers(0, NUM_ACTIONS, (rows, 1)).astype(np.int64)},
            rewards={"reward": np.ones((rows, 1), dtype=np.float32)},
            next_episode_end=np.zeros((rows, 1), dtype=np.float32),
            sequence_lengths=None if dqn else (rows,),
        )

    print(f"{'learn call':<30} {'ms':>8} {'steps':>6} {'ms/step':>8}")
    for kind, rows in (("dqn", 64), ("ppo", 128)):
        task = make_task(kind, False)
        data = batch(rows, kind == "dqn")
        task.learn(data)
        timer = per_call_us(lambda task=task, data=data: task.learn(data), seconds=0.3)
        ms = statistics.median(timer() for _ in range(repeats)) / 1000
        steps = 1 if kind == "dqn" else task.algorithm.epochs * task.algorithm.num_minibatches
        print(f"{task.name + f' learn, batch {rows}':<30} {ms:>8.2f} {steps:>6} {ms / steps:>8.3f}", flush=True)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128, 256])
    parser.add_argument("--normalize", action="store_true", help="normalize inputs (running mean and std)")
    parser.add_argument("--repeats", type=int, default=15, help="rounds per path (each ~20 ms of calls)")
    parser.add_argument("--train", action="store_true", help="also time one DQN and one PPO update")
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=["dqn", "ppo"], help="rows to time")
    parser.add_argument("--deterministic", action="store_true", help="greedy or mean actions instead of samples")
    args = parser.parse_args(argv)
    predict_rows(args.batches, args.normalize, args.repeats, args.tasks, args.deterministic)
    if args.train:
        train_rows(args.repeats)


if __name__ == "__main__":
    main()
