"""The hierarchical four-rooms robot beside a flat DQN, with the same env-step budget and agents.

    python examples/hierarchical/compare.py [--seeds 0 1 2] [--only hierarchical|flat]
                                            [--log-dir runs/four_rooms] [-o KEY.PATH=VALUE ...]

For each seed, trains the robot of hierarchical.yaml (tasks ``goal``: DQN over
subgoals, ``follow``: A2C towards the subgoal) and then the one of flat.yaml
(one task ``RL``: DQN over the four moves), each with parl's Trainer on
FourRooms until the config's env-step budget. The overrides ``-o`` apply to
both configs (``train.max_env_steps=150000``, ``agents=4``,
``evaluation.every_steps=null``...); each run logs under
``<log-dir>/<robot>/seed<seed>``. The trainer's evaluations play
deterministic episodes (greedy subgoals and moves); as the only reward is 1,
at the goal, their mean return is the success rate. One line per run, then a
table of the last evaluation's success rate and that of the last training
episodes (exploration on). docs/hierarchical.md records the results.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from parl.experiment.config.robot_config import load_config
from parl.experiment.runs.plot import read_curves
from parl.experiment.train.trainer import Trainer

HERE = Path(__file__).resolve().parent
#: The robots compared, each the config ``<name>.yaml`` beside this file.
ROBOTS = ("hierarchical", "flat")
#: Training episodes whose success rate the table shows (exploration on).
RECENT_EPISODES = 40


def run(robot: str, seed: int, log_dir: str, overrides: Sequence[str] = ()) -> Dict[str, object]:
    """Train ``robot`` (``hierarchical`` or ``flat``) with ``seed``, logging to ``log_dir``.

    Returns the Trainer's result, plus ``curve`` (``(env_steps, success_rate)`` of each
    evaluation) and ``training_success`` (of the last :data:`RECENT_EPISODES` training episodes),
    both read from the run's ``metrics.jsonl``.

    Raises:
        ValueError: ``robot`` is not one of :data:`ROBOTS`.
        ConfigError: an override does not fit the config.
    """
    if robot not in ROBOTS:
        raise ValueError(f"robot must be one of {list(ROBOTS)}, got {robot!r}")
    config = load_config(str(HERE / f"{robot}.yaml"), [*overrides, f"seed={seed}", f"log_dir={log_dir}"])
    result = Trainer(config, progress=False).run()
    curves = read_curves(log_dir)
    steps, rates = curves.get("eval/mean_return", ((), ()))
    returns = curves["episode/reward"][1]
    return {
        **result,
        "curve": [(int(step), float(rate)) for step, rate in zip(steps, rates)],
        "training_success": float(np.mean(returns[-RECENT_EPISODES:])),
    }


def main(argv: Optional[List[str]] = None) -> Dict[str, List[Dict[str, object]]]:
    """The command line: train both robots (or ``--only`` one) for every seed; print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", choices=ROBOTS, help="train one robot only")
    parser.add_argument("--log-dir", default="runs/four_rooms", help="runs go to LOG_DIR/<robot>/seed<seed>")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    args = parser.parse_args(argv)
    names = [args.only] if args.only else list(ROBOTS)
    results: Dict[str, List[Dict[str, object]]] = {name: [] for name in names}
    for seed in args.seeds:
        for name in names:
            result = run(name, seed, os.path.join(args.log_dir, name, f"seed{seed}"), args.override)
            results[name].append(result)
            curve = "  ".join(f"{step}: {rate:.2f}" for step, rate in result["curve"])
            print(
                f"{name:12s} seed {seed}  {result['env_steps']} env steps, {result['episodes']} episodes, "
                f"updates {result['updates']}, {result['train_seconds']:.1f} s; success rate by env steps: {curve}",
                flush=True,
            )
    print(f"\nsuccess rate (last evaluation: deterministic; training: the last {RECENT_EPISODES} training episodes)")
    print("robot         episodes        " + "  ".join(f"seed {seed:<3d}" for seed in args.seeds) + "  mean")
    for name in names:
        for key, label in (("last_eval", "deterministic"), ("training_success", "training")):
            rates = [float(result[key]) for result in results[name]]
            print(
                f"{name:12s}  {label:14s}  " + "  ".join(f"{rate:8.2f}" for rate in rates) + f"  {np.mean(rates):.2f}"
            )
    return results


if __name__ == "__main__":
    main()
