"""Env steps per second and the longest stall of many agents in threads, per thread placement.

    python benchmarks/many_threads.py [--agents 1024] [--placements one_core split os auto] [--seconds 20]

Each row runs ``--agents`` predict-only agents as threads (``placement="threads"``) on the cheap
short-episode environment of benchmarks/short_episodes.py under one ``thread_placement``. After a
warm-up, the main thread samples the agents' summed env steps every 100 ms; the row gives the mean
env steps per second and the longest stall: the longest time between two samples that saw the
count move (so a robot that makes no progress for 3 s shows a 3 s stall, and a steady one about
0.1 s). Target: at least 5,000 env steps/s and no stall over 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import List, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from short_episodes import build_robot  # noqa: E402

from parl import affinity  # noqa: E402

#: Seconds between progress samples.
SAMPLE_INTERVAL = 0.1


class Run(NamedTuple):
    """One row: the mean rate over the measured time and the longest stall in it."""

    steps_per_s: float
    longest_stall: float
    start_seconds: float


def measure(num_agents: int, thread_placement: str, seconds: float, warmup: float) -> Run:
    """``num_agents`` thread agents under ``thread_placement``: rate and longest stall over ``seconds``."""
    manager, agents = build_robot(num_agents, thread_placement=thread_placement)
    began = time.perf_counter()
    manager.start()
    start_seconds = time.perf_counter() - began
    try:
        time.sleep(warmup)
        first = last_count = sum(a.steps for a in agents)
        start = last_move = time.perf_counter()
        stall = 0.0
        while True:
            time.sleep(SAMPLE_INTERVAL)
            now, count = time.perf_counter(), sum(a.steps for a in agents)
            if count != last_count:
                stall, last_move, last_count = max(stall, now - last_move), now, count
            if now - start >= seconds:
                stall = max(stall, now - last_move)
                break
        if manager.errors:
            raise manager.errors[0]
        return Run((count - first) / (now - start), stall, start_seconds)
    finally:
        manager.stop(timeout=30.0)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1024])
    parser.add_argument("--placements", nargs="+", default=list(affinity.PLACEMENTS), choices=affinity.PLACEMENTS)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured time per row, after the warm-up")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after start before measuring")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over every row (median and range shown)")
    args = parser.parse_args(argv)
    runs = {(n, p): [] for n in args.agents for p in args.placements}
    for _ in range(args.repeats):
        for n, p in runs:
            runs[n, p].append(measure(n, p, args.seconds, args.warmup))
    print(
        f"{'agents':>6}  {'thread_placement':<16} {'resolves to':<11} {'env steps/s':>12} {'longest stall s':>16}"
        f" {'start s':>8}  runs (steps/s, stall s)"
    )
    for (n, p), rs in runs.items():
        each = ", ".join(f"{r.steps_per_s:,.0f}/{r.longest_stall:.2f}" for r in rs)
        print(
            f"{n:>6}  {p:<16} {affinity.resolve(p, n):<11} {statistics.median(r.steps_per_s for r in rs):>12,.0f}"
            f" {max(r.longest_stall for r in rs):>16.2f} {statistics.median(r.start_seconds for r in rs):>8.2f}"
            f"  {each}"
        )
    print(
        f"env steps sampled every {SAMPLE_INTERVAL * 1e3:.0f} ms after a {args.warmup:g} s warm-up; "
        f"{args.seconds:g} s per run; steps/s the median over runs, stall the longest"
    )


if __name__ == "__main__":
    main()
