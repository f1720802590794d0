"""Weights after a fixed single-agent run, to compare two versions of parl bit for bit.

    PYTHONPATH=<tree> python benchmarks/same_weights.py examples/configs/dqn_cartpole.yaml 30 /tmp/a.npz
    python benchmarks/same_weights.py --compare /tmp/a.npz /tmp/b.npz

The run is the config's robot with one agent in placement "threads", seeded as ``parl train`` seeds
it, playing exactly EPISODES episodes: with one agent every prediction is a batch of one and every
update is learned before the agent goes on (helpers wait for their updates by default), so the run
is deterministic on one machine. The agent is then parked and every task's algorithm weights are
written to OUT (``.npz``). ``--compare`` exits 0 when two such files hold the same arrays, bit for bit.
The config is built through ``parl.experiment.config.build`` (parl 0.2) or ``parl.experiment.build``
(parl 0.1), so one copy of this script measures both.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from typing import Any, Dict, List

import numpy as np


def _build_module() -> Any:
    try:
        return importlib.import_module("parl.experiment.config.build")
    except ImportError:  # parl 0.1
        return importlib.import_module("parl.experiment.build")


def train_weights(config_path: str, episodes: int) -> Dict[str, np.ndarray]:
    """Every task's algorithm weights after ``episodes`` episodes of one agent (see the module text)."""
    import parl
    from parl.experiment.config import load_config

    config = load_config(config_path, ["seed=0", "agents=1", "placement=threads"])
    agents: List[Any] = []
    add_agent = parl.Manager.add_agent

    def recording_add_agent(self: Any, agent: Any, helpers: Any, **options: Any) -> Any:
        agents.append(agent)
        return add_agent(self, agent, helpers, **options)

    parl.Manager.add_agent = recording_add_agent  # type: ignore[method-assign]
    parl.seed_everything(config.seed)
    manager = _build_module().build_manager(config)
    (agent,) = agents
    played, done = [0], threading.Event()
    play = type(agent).run_one_episode

    def limited(self: Any) -> Any:
        if played[0] >= episodes:
            done.set()
            threading.Event().wait()  # parked: nothing more is predicted or learned
        played[0] += 1
        return play(self)

    type(agent).run_one_episode = limited
    manager.start()
    if not done.wait(1800):
        raise TimeoutError(f"{episodes} episodes did not end in 30 minutes")
    arrays: Dict[str, np.ndarray] = {}
    for task_name, task in manager.tasks.items():
        _flatten(task_name, task.algorithm_weights(), arrays)
    return arrays


def _flatten(prefix: str, value: Any, out: Dict[str, np.ndarray]) -> None:
    """``value``'s arrays into ``out`` by their path of keys (an input normalizer's state is a mapping)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}/{key}", item, out)
    else:
        out[prefix] = np.asarray(value)


def same_arrays(first: str, second: str) -> bool:
    """Whether two ``.npz`` files hold the same names and bit-identical arrays."""
    a, b = np.load(first, allow_pickle=False), np.load(second, allow_pickle=False)
    return sorted(a.files) == sorted(b.files) and all(
        a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a.files
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("args", nargs="+", help="CONFIG EPISODES OUT, or with --compare: A.npz B.npz")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    if args.compare:
        same = same_arrays(*args.args)
        print(f"{args.args[0]} {args.args[1]}: bit-identical={same}")
        return 0 if same else 1
    config_path, episodes, out = args.args
    arrays = train_weights(config_path, int(episodes))
    np.savez(out, **arrays)
    print(f"{len(arrays)} arrays after {episodes} episodes -> {out}")
    sys.stdout.flush()
    os._exit(0)  # the parked agent thread is not joined


if __name__ == "__main__":
    sys.exit(main())
