"""Train CartPole over RLX on one machine: ``parl serve`` and N client processes of
``cartpole_client.py``, one run per seed; prints each run's result and how many reached the target.

    python examples/rlx/train_cartpole.py --seeds 0 1 2            # 8 Python clients, ppo_cartpole.yaml
    python examples/rlx/train_cartpole.py --clients 4 -o tasks.RL.algorithm.learning_rate=1e-3

Each run's server stops at the config's target (a greedy evaluation on local gymnasium copies,
confirmed on fresh seeds) or its step budget; its clients then get ``error shutdown`` and exit.
Logs go to ``runs/rlx_cartpole-s<seed>``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

from parl.experiment.cli.serve_process import start_serve

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def run(config: str, seed: int, clients: int, overrides: Sequence[str]) -> Dict[str, object]:
    """One seed: ``parl serve`` of ``config`` on a free loopback port and its clients, until the server
    stops; the server's result."""
    log_dir = str(REPO / "runs" / f"rlx_cartpole-s{seed}")
    args = [config, "--bind", "127.0.0.1:0", "--quiet", "-o", f"seed={seed}", "-o", f"log_dir={log_dir}"]
    for override in overrides:
        args += ["-o", override]
    server, address = start_serve(args, cwd=str(REPO), stderr=None)
    client = [sys.executable, str(HERE / "cartpole_client.py"), "--address", address]
    players = [subprocess.Popen([*client, "--seed", str(seed * 1000 + i)], cwd=REPO) for i in range(clients)]
    try:
        server.communicate()
    finally:
        for process in [server, *players]:
            if process.poll() is None:
                process.terminate()
            process.wait()
    if server.returncode != 0:
        raise SystemExit(f"parl serve exited with status {server.returncode}")
    return json.loads(Path(log_dir, "result.json").read_text())


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="examples/configs/ppo_cartpole.yaml", help="default: %(default)s")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed")
    parser.add_argument("--clients", type=int, default=8, help="client processes (default: %(default)s)")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    args = parser.parse_args(argv)
    reached = 0
    for seed in args.seeds:
        result = run(args.config, seed, args.clients, [f"agents={args.clients}", *args.override])
        reached += bool(result["reached"])
        keys = ("seed", "reached", "env_steps", "train_seconds", "best_eval", "final_eval", "stop_reason")
        print(json.dumps({key: result[key] for key in keys}), flush=True)
    print(f"{reached}/{len(args.seeds)} seeds reached the target", flush=True)


if __name__ == "__main__":
    main()
