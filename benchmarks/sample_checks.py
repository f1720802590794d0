"""Per-call cost of what an agent's every step goes through before anything is queued: the check of a
prediction sample (``Communicator.checked``) and ``AgentHelper.store_data`` into a replay helper.

    taskset -c 1 python benchmarks/sample_checks.py [--repeats 7] [--calls 20000]

Rows: CartPole-sized samples (4 float32 inputs, one int64 action of 2, one float reward) for the
DQN model, and an 84x84 float32 frame as a larger input. Each row gives the fastest round's
microseconds per call (on a shared machine the minimum is the steadier figure) and the median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, List

import numpy as np

import parl
from parl.algorithms import DQN
from parl.core.model import Model
from parl.models import MLPQModel
from parl.serving.direct import DirectCommunicator


class FrameModel(Model):
    """One 84x84 float32 frame in, one of two actions out (its layers are never built here)."""

    def get_input_specs(self):
        return [("obs", dict(shape=[84, 84], dtype="float32"))]

    def get_action_specs(self):
        return MLPQModel(obs_dim=4, num_actions=2).get_action_specs()


def rounds(call: Callable[[], object], calls: int, repeats: int) -> List[float]:
    """Microseconds per call of each of ``repeats`` rounds of ``calls`` calls."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        out.append((time.perf_counter() - start) / calls * 1e6)
    return out


def communicator(model_func: Callable[[], Model]) -> DirectCommunicator:
    algorithm = DQN(model_func)
    return DirectCommunicator(parl.ComputationTask("RL", algorithm))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    cartpole = communicator(lambda: MLPQModel(obs_dim=4, num_actions=2))
    frame = communicator(FrameModel)
    obs = np.random.default_rng(0).standard_normal(4).astype(np.float32)
    pixels = np.random.default_rng(0).standard_normal((84, 84)).astype(np.float32)
    action = {"action": np.array([1], np.int64)}
    helper = parl.ExpReplayHelper(capacity=1000, batch_size=32, warmup_steps=10**9)
    helper.bind(cartpole)

    rows = [
        ("checked: CartPole obs", lambda: cartpole.checked({"obs": obs}, None)),
        ("checked: 84x84 float32 frame", lambda: frame.checked({"obs": pixels}, None)),
        ("store_data: CartPole step", lambda: helper.store_data({"obs": obs}, action, 1.0, {"obs": obs}, False, False)),
    ]
    print(f"{'call':34s} {'fastest us':>11s} {'median us':>10s}")
    for name, call in rows:
        times = rounds(call, args.calls, args.repeats)
        print(f"{name:34s} {min(times):11.2f} {statistics.median(times):10.2f}")


if __name__ == "__main__":
    main()
