"""Milliseconds per training update of the two workloads that set the pace of real runs, parl beside
Stable-Baselines3 on the same core.

    taskset -c 1 .venv/bin/python benchmarks/update_cost.py                 # both workloads, SB3 too
    taskset -c 1 .venv/bin/python benchmarks/update_cost.py --no-sb3 --workloads sac-halfcheetah

Workloads (the settings of examples/configs and of rl-zoo):

- ``dqn-atari``: one DQN update of 32 stacked Atari frames (uint8 [4, 84, 84], 6 actions) through the
  Nature CNN (parl.models.AtariQModel; SB3's ``CnnPolicy``): Adam, Huber loss, gradient norm clipped
  at 10, a replay sample included. parl runs it as SB3 does (the target network picks the next action)
  and as Double DQN (examples/configs/dqn_atari.yaml: one more forward pass, no gradient).
- ``sac-halfcheetah``: one SAC update of 256 transitions of HalfCheetah-v5's sizes (17 observations,
  6 actions) with 256x256 actor and twin critics, automatic entropy tuning, a replay sample included.

parl's side runs in this process (a ComputationTask learning batches its ReplayBuffer samples, as an
ExpReplayHelper does); SB3's runs benchmarks/sb3_update_cost.py in ``.venv-sb3`` (``make .venv-sb3``).
Both count the thread's CPU time per update (``time.thread_time``), so time the OS gives to other
processes is not counted; each side does ``--rounds`` rounds of ``--updates`` updates, and the table
gives the median and the fastest round's mean. Pin the process to one core (``taskset``): both sides
then run there, one after the other, with one intra-op thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import parl
from parl.algorithms import DQN, SAC
from parl.core.specs import Spec
from parl.models import AtariQModel, GaussianActorCritic

ROOT = Path(__file__).resolve().parents[1]
SB3_PYTHON = ROOT / ".venv-sb3" / "bin" / "python"
SB3_SIDE = ROOT / "benchmarks" / "sb3_update_cost.py"
CAPACITY = 5_000  # replay rows, as the SB3 side's buffer


def random_buffer(specs: Sequence[Sequence[Spec]], rng: np.random.Generator) -> parl.ReplayBuffer:
    """A ReplayBuffer of :data:`CAPACITY` random rows shaped by ``specs`` (input, state, action, reward)."""
    buffer = parl.ReplayBuffer(CAPACITY, *specs)
    inputs, _, actions, rewards = specs

    def draw(spec: Spec) -> np.ndarray:
        if spec.dtype.kind in "iu":
            high = spec.value_range[1] if spec.value_range is not None else 256
            return rng.integers(0, high, size=spec.shape).astype(spec.dtype)
        return rng.standard_normal(spec.shape).astype(spec.dtype)

    for _ in range(CAPACITY):
        buffer.add(
            parl.Transition(
                inputs={s.name: draw(s) for s in inputs},
                next_inputs={s.name: draw(s) for s in inputs},
                states={},
                next_states={},
                actions={s.name: draw(s) for s in actions},
                rewards={s.name: rng.standard_normal(s.shape).astype(np.float32) for s in rewards},
                next_episode_end=np.zeros(1, np.float32),
            )
        )
    return buffer


def parl_update(task: parl.ComputationTask, batch_size: int) -> Callable[[], None]:
    """One update as an ExpReplayHelper makes it: a uniform replay sample, learned by ``task``."""
    rng = np.random.default_rng(0)
    specs = (task.input_specs, task.state_specs, task.action_specs, task.reward_specs)
    buffer = random_buffer(specs, rng)
    return lambda: task.learn(buffer.sample(batch_size, rng))


def dqn_task(double_q: bool) -> parl.ComputationTask:
    algorithm = DQN(lambda: AtariQModel(num_actions=6), learning_rate=1e-4, double_q=double_q, grad_clip=10.0)
    return parl.ComputationTask("dqn", algorithm)


def sac_task() -> parl.ComputationTask:
    func = parl.create_algorithm_func(GaussianActorCritic, dict(obs_dim=17, action_dim=6), SAC, {})
    return parl.ComputationTask("sac", func())


#: row label -> (workload, a function making parl's update), in table order.
PARL_ROWS: Dict[str, tuple] = {
    "DQN Nature CNN, batch 32 (SB3's targets)": ("dqn-atari", lambda: parl_update(dqn_task(False), 32)),
    "Double DQN Nature CNN, batch 32 (the config's)": ("dqn-atari", lambda: parl_update(dqn_task(True), 32)),
    "SAC 256x256, batch 256": ("sac-halfcheetah", lambda: parl_update(sac_task(), 256)),
}


def time_rounds(update: Callable[[], None], rounds: int, updates: int) -> List[List[float]]:
    """Thread-CPU milliseconds of each call of ``update``, ``rounds`` rounds of ``updates`` (after 3 warm-up calls)."""
    for _ in range(3):
        update()
    out = []
    for _ in range(rounds):
        times = []
        for _ in range(updates):
            start = time.thread_time()
            update()
            times.append((time.thread_time() - start) * 1e3)
        out.append(times)
    return out


def sb3_rounds(workload: str, rounds: int, updates: int) -> Optional[List[List[float]]]:
    """SB3's milliseconds per ``train()`` step of ``workload``, or None without ``.venv-sb3``."""
    if not SB3_PYTHON.exists():
        return None
    command = [str(SB3_PYTHON), str(SB3_SIDE), "--workload", workload, "--rounds", str(rounds)]
    done = subprocess.run(command + ["--updates", str(updates)], capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])["ms"]


def summary(rounds: List[List[float]]) -> str:
    """``median (fastest round's mean)`` in ms."""
    median = statistics.median(t for times in rounds for t in times)
    return f"{median:8.1f} ({min(statistics.mean(times) for times in rounds):6.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=("dqn-atari", "sac-halfcheetah"),
                        default=["dqn-atari", "sac-halfcheetah"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=5, help="timed updates per round")
    parser.add_argument("--no-sb3", action="store_true", help="parl's side only")
    args = parser.parse_args()
    print(f"{'update':<48} {'ms median (best round)':>24}   SB3 ms median (best round)   parl / SB3")
    sb3_cache: Dict[str, Optional[List[List[float]]]] = {}
    for label, (workload, make) in PARL_ROWS.items():
        if workload not in args.workloads:
            continue
        mine = time_rounds(make(), args.rounds, args.updates)
        if workload not in sb3_cache:
            sb3_cache[workload] = None if args.no_sb3 else sb3_rounds(workload, args.rounds, args.updates)
        theirs = sb3_cache[workload]
        ratio = "" if theirs is None else f"{statistics.median(sum(mine, [])) / statistics.median(sum(theirs, [])):.2f}"
        print(f"{label:<48} {summary(mine):>24}   {summary(theirs) if theirs else 'n/a':>26}   {ratio:>10}")


if __name__ == "__main__":
    main()
