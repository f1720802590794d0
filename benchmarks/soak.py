"""Memory of a long run: 256 agents on short episodes, the Manager's RSS every minute.

    python benchmarks/soak.py [--minutes 10] [--agents 256] [--episode-steps 10] [--sample-seconds 60]
                              [--placement threads]

The robot of benchmarks/short_episodes.py (predict-only agents, in threads unless ``--placement``
says otherwise, the Manager's default thread placement and episode window) runs for ``--minutes``. The main thread reads
``Manager.new_episodes()`` and a snapshot of the wrapper's statistics every 20 ms, as the
training loop does, and prints a row every ``--sample-seconds``: elapsed minutes,
this process's resident memory (VmRSS of /proc/self/status), episodes and env steps so far and
the records the Manager keeps. It ends with the RSS at the end against the RSS after the first
row; target: within 5%.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from short_episodes import EPISODE_STEPS, build_robot  # noqa: E402

from parl.runtime import registry  # noqa: E402

#: Seconds between reads of new_episodes (the training loop's interval).
READ_INTERVAL = 0.02
#: Largest RSS growth from the first row to the end that counts as flat.
TARGET_GROWTH = 0.05


def rss_mib() -> float:
    """This process's resident set size in MiB (VmRSS of /proc/self/status)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS line in /proc/self/status")


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--agents", type=int, default=256)
    parser.add_argument("--episode-steps", type=int, default=EPISODE_STEPS)
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="seconds between rows")
    parser.add_argument("--placement", default="threads", choices=registry.names(), help="Manager placement")
    args = parser.parse_args(argv)
    manager, agents = build_robot(args.agents, args.episode_steps, placement=args.placement)
    stats = manager.wrappers["RL"].stats
    print(
        f"{args.agents} agents in {args.placement}, {args.episode_steps}-step episodes, thread placement "
        f"{manager.thread_placement!r} ({manager.placed_threads()}), episode window {manager.episode_window:,}"
    )
    print(f"{'minutes':>7} {'RSS MiB':>9} {'episodes':>11} {'env steps':>12} {'steps/s':>8} {'kept records':>13}")
    manager.start()
    start = last_row = time.perf_counter()
    last_steps, read, first_rss, rss = 0, 0, None, rss_mib()
    try:
        while True:
            time.sleep(READ_INTERVAL)
            read += len(manager.new_episodes())
            stats.snapshot()
            if manager.errors:
                raise manager.errors[0]
            now = time.perf_counter()
            if now - last_row >= args.sample_seconds or now - start >= args.minutes * 60:
                steps, rss = sum(a.steps for a in agents), rss_mib()
                first_rss = rss if first_rss is None else first_rss
                print(
                    f"{(now - start) / 60:>7.1f} {rss:>9.1f} {manager.episode_totals().episodes:>11,} {steps:>12,}"
                    f" {(steps - last_steps) / (now - last_row):>8,.0f} {len(manager.episodes()):>13,}",
                    flush=True,
                )
                last_row, last_steps = now, steps
                if now - start >= args.minutes * 60:
                    break
    finally:
        manager.stop(timeout=30.0)
    growth = rss / first_rss - 1.0
    print(
        f"RSS at the end {rss:.1f} MiB against {first_rss:.1f} MiB after the first row: {growth:+.1%} "
        f"(target within {TARGET_GROWTH:.0%}: {'met' if abs(growth) <= TARGET_GROWTH else 'missed'}); "
        f"new_episodes read {read:,} records, missed {manager.missed_episodes:,}"
    )


if __name__ == "__main__":
    main()
