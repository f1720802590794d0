"""Env steps to a greedy 475 on CartPole-v1: IMPALA and APPO against synchronous PPO, seed by seed.

    python benchmarks/async_cartpole.py [--seeds 0-2] [--algorithms ppo appo impala] [--workers 2]

Each run is ``parl train`` of ``examples/configs/<algorithm>_cartpole.yaml`` in a process of its own,
with ``seed`` set and placement ``processes`` with ``--workers`` worker processes (PPO's config too,
so every algorithm's agents run alike), one after the other: PPO synchronous, IMPALA and APPO
asynchronous (agents hand their segments over and act on, one segment in flight each;
``placement.asynchronous``, ``placement.segments_in_flight``). ``parl train`` stops at the first
greedy evaluation of mean >= 475 and evaluates that policy again on fresh seeds ("final eval").
The table gives each run's env steps and wall time to that point (result.json), and per algorithm
the median env steps and its ratio to PPO's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Sequence

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = ("ppo", "appo", "impala")


class Run(NamedTuple):
    """One training run's outcome."""

    algorithm: str
    seed: int
    env_steps: int
    wall_seconds: float
    reached: bool
    final_eval: float


def parse_seeds(text: str) -> List[int]:
    """``0-2`` or ``0,3,7`` as a list of seeds.

    Raises:
        ValueError: ``text`` is neither form (the message names it).
    """
    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-"))
            return list(range(first, last + 1))
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds: expected a range such as 0-2 or a list such as 0,3,7, got {text!r}") from None


def train(algorithm: str, seed: int, workers: int, log_dir: Path) -> Run:
    """One ``parl train`` run of ``algorithm``'s CartPole config."""
    config = ROOT / "examples" / "configs" / f"{algorithm}_cartpole.yaml"
    command = [sys.executable, str(ROOT / "parl_cli.py"), "train", str(config), "--quiet"]
    # PPO is the synchronous baseline; IMPALA and APPO learn without waiting (their configs' asynchronous: true).
    asynchronous = "false" if algorithm == "ppo" else "true"
    overrides = (f"seed={seed}", f"log_dir={log_dir}", "placement=processes", f"placement.workers={workers}")
    inflight = () if algorithm == "ppo" else ("placement.segments_in_flight=1",)
    for override in (*overrides, f"placement.asynchronous={asynchronous}", *inflight):
        command += ["-o", override]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    result = json.loads((log_dir / "result.json").read_text())
    final = result.get("final_eval")
    return Run(algorithm, seed, int(result["env_steps"]), wall, bool(result["reached"]), float(final or "nan"))


def table(runs: Sequence[Run]) -> str:
    """The runs, one line each, then each algorithm's median env steps and its ratio to PPO's."""
    lines = [f"{'algorithm':>9}  {'seed':>4}  {'env steps to 475':>16}  {'wall s':>6}  {'final eval':>10}"]
    for run in runs:
        steps = f"{run.env_steps}" if run.reached else f">{run.env_steps}"
        lines.append(f"{run.algorithm:>9}  {run.seed:>4}  {steps:>16}  {run.wall_seconds:6.1f}  {run.final_eval:10.1f}")
    medians: Dict[str, float] = {}
    for algorithm in dict.fromkeys(run.algorithm for run in runs):
        medians[algorithm] = statistics.median(run.env_steps for run in runs if run.algorithm == algorithm)
    for algorithm, median in medians.items():
        ratio = f", {median / medians['ppo']:.2f}x PPO's" if "ppo" in medians else ""
        lines.append(f"{algorithm}: median {median:.0f} env steps{ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-2", help="0-2 or 0,3,7")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=ALGORITHMS)
    parser.add_argument("--workers", type=int, default=2, help="worker processes of each run")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    runs = []
    with tempfile.TemporaryDirectory(prefix="async_cartpole_") as scratch:
        for seed in seeds:
            for algorithm in args.algorithms:
                runs.append(train(algorithm, seed, args.workers, Path(scratch) / f"{algorithm}_{seed}"))
                print(table(runs[-1:]).splitlines()[1], flush=True)
    print(table(runs))


if __name__ == "__main__":
    main(sys.argv[1:])
