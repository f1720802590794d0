"""One training run of a parl example's robot config, in this process, with the Trainer.

    .venv/bin/python benchmarks/parl_runner.py --config examples/configs/dqn_cartpole.yaml --seed 0 --target 475
    .venv/bin/python benchmarks/parl_runner.py --config examples/configs/td3_pendulum.yaml -o train.max_env_steps=9000

``--seed``, ``--target`` and ``--check-interval`` set ``seed``, ``train.target_return``
and ``evaluation.every_steps``; then each ``-o KEY.PATH=VALUE`` (``--option``) changes
one config value, as ``parl train -o`` does. The run logs to a temporary directory,
without progress bar. Prints one line ``RESULT {json}`` in the keys of
benchmarks/sb3_runner.py: ``seed``, ``train_seconds``, ``env_steps``, ``updates`` (all
tasks'), ``episodes``, ``reached``, ``greedy_check`` (the last evaluation's mean
return), ``best_greedy_check``, ``greedy_mean_return`` (the final evaluation's, on
fresh seeds), plus ``budget`` (``train.max_env_steps``) and ``cpu_seconds`` (the
process's CPU time over the whole call: set-up, training, final evaluation). ``--no-eval`` skips every
evaluation after training (the evaluation keys are then NaN), for runs that measure training alone;
``run_cpu_seconds`` is the process's CPU time in ``Trainer.run()`` (training, and evaluations unless
``--no-eval``), without imports and config loading.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer

#: The runner's result keys (as benchmarks/sb3_runner.py's) -> the Trainer's.
RESULT_KEYS = {
    "seed": "seed",
    "train_seconds": "train_seconds",
    "env_steps": "env_steps",
    "episodes": "episodes",
    "reached": "reached",
    "greedy_check": "last_eval",
    "best_greedy_check": "best_eval",
    "greedy_mean_return": "final_eval",
}


def run_overrides(
    seed: int, target: Optional[float], check_interval: Optional[int], options: Sequence[str], log_dir: str
) -> List[str]:
    """The config overrides of one run: seed, target, evaluation interval and log dir, then ``options``."""
    overrides = [f"seed={seed}", f"log_dir={log_dir}"]
    if target is not None:
        overrides.append(f"train.target_return={target}")
    if check_interval is not None:
        overrides.append(f"evaluation.every_steps={check_interval}")
    return overrides + list(options)


def runner_result(result: Dict[str, Any]) -> Dict[str, Any]:
    """The Trainer's ``result`` in the runner's keys (:data:`RESULT_KEYS`; ``updates`` summed over tasks)."""
    out = {ours: result[theirs] for ours, theirs in RESULT_KEYS.items()}
    out["updates"] = sum(result["updates"].values())
    return out


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="path of the robot config")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=None, help="train.target_return (default: the config's)")
    parser.add_argument("--check-interval", type=int, default=None, help="env steps between evaluations")
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument(
        "--no-eval", action="store_true", help="no evaluation after training (the Trainer's evaluate=False)"
    )
    args = parser.parse_args(argv)
    cpu_start = time.process_time()
    with tempfile.TemporaryDirectory(prefix="parl-runner-") as log_dir:
        overrides = run_overrides(args.seed, args.target, args.check_interval, args.option, log_dir)
        config = load_config(str(args.config), overrides)
        train_cpu_start = time.process_time()
        result = runner_result(Trainer(config, progress=False, evaluate=not args.no_eval).run())
        result["run_cpu_seconds"] = time.process_time() - train_cpu_start
    result["cpu_seconds"] = time.process_time() - cpu_start
    result["budget"] = config.train.max_env_steps
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
