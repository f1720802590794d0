"""Wall time (after imports) of examples/dqn_cartpole.py to a greedy 10-episode mean of 475, per seed.

    python benchmarks/dqn_cartpole_time.py [--seeds 0 1 2]

Each seed runs in a fresh process, one after another, so runs do not share
cores. Prints one row per seed and the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]

_RUN_ONE = """
import json, sys
sys.path.insert(0, {examples!r})
import dqn_cartpole
print("RESULT " + json.dumps(dqn_cartpole.train(seed={seed}, verbose=False)))
"""


def run_seed(seed: int) -> dict:
    code = _RUN_ONE.format(examples=str(ROOT / "examples"), seed=seed)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    print(f"{'seed':>4} {'train s':>8} {'env steps':>10} {'updates':>8} {'greedy check':>13} {'final greedy':>13}")
    results = []
    for seed in args.seeds:
        r = run_seed(seed)
        results.append(r)
        print(
            f"{seed:>4} {r['train_seconds']:>8.1f} {r['env_steps']:>10d} {r['updates']:>8d} "
            f"{r['greedy_check']:>13.1f} {r['greedy_mean_return']:>13.1f}",
            flush=True,
        )
    reached = [r for r in results if r["greedy_check"] >= 475]
    print(
        f"median train seconds: {statistics.median(r['train_seconds'] for r in results):.1f} "
        f"({len(reached)}/{len(results)} seeds reached a greedy 475; "
        f"final greedy >= 475 in {sum(r['greedy_mean_return'] >= 475 for r in results)}/{len(results)})"
    )


if __name__ == "__main__":
    main()
