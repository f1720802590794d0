"""Seconds of ``evaluate_agents`` for a trained policy's evaluation episodes: a Trainer's confirmation.

    .venv/bin/python -m parl train examples/configs/ppo_cartpole.yaml -o log_dir=/tmp/ppo   # ~20 s
    .venv/bin/python benchmarks/eval_episodes.py examples/configs/ppo_cartpole.yaml /tmp/ppo/checkpoints/best
    .venv/bin/python benchmarks/eval_episodes.py CONFIG CHECKPOINT --episodes 60 --repeats 5 --concurrency 1 32

Loads the checkpoint's weights into the config's tasks (as ``parl eval`` does) and times
``evaluate_agents`` of ``--episodes`` episodes (seeds 1000 on) ``--repeats`` times, alternating
the ``--concurrency`` values, one line each: median seconds, the spread, and per env step; the
returns of every setting are checked to be the same. A tree whose ``evaluate_agents`` takes no
``concurrency`` (episodes one by one) is timed as it is, once per repeat.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from typing import Dict, List, Optional

from parl.experiment.cli.commands import load_trained_tasks
from parl.experiment.config.build import make_agent
from parl.experiment.config.robot_config import load_config
from parl.experiment.evaluation.agents import evaluate_agents


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("checkpoint")
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args(argv)
    config = load_config(args.config, [])
    tasks, checkpoint, _ = load_trained_tasks(config, args.checkpoint)
    batched = "concurrency" in inspect.signature(evaluate_agents).parameters
    settings = args.concurrency if batched else [None]
    seconds: Dict[Optional[int], List[float]] = {c: [] for c in settings}
    returns: Dict[Optional[int], List[float]] = {}
    for _ in range(args.repeats):
        for concurrency in settings:
            options = {} if concurrency is None else {"concurrency": concurrency}
            start = time.perf_counter()
            returns[concurrency] = evaluate_agents(
                lambda seed: make_agent(config, 0, seed=seed), tasks, episodes=args.episodes, seed=1000, **options
            )
            seconds[concurrency].append(time.perf_counter() - start)
    if len({tuple(r) for r in returns.values()}) != 1:
        raise SystemExit(f"the settings' returns differ: {returns}")
    steps = sum(next(iter(returns.values())))  # CartPole: one reward per step
    print(f"{checkpoint}: {args.episodes} episodes, mean return {steps / args.episodes:.1f}")
    for concurrency, times in seconds.items():
        median = statistics.median(times)
        label = "one by one (no concurrency option)" if concurrency is None else f"concurrency {concurrency}"
        print(
            f"{label:36s} median {median:.3f} s  [{min(times):.3f}, {max(times):.3f}]  "
            f"{median / steps * 1e6:.1f} us/step (if one reward per step)"
        )


if __name__ == "__main__":
    main()
