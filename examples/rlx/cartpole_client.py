"""One CartPole-v1 environment that trains against a robot served over RLX.

    parl serve examples/configs/ppo_cartpole.yaml                       # 8 clients at most
    python examples/rlx/cartpole_client.py --seed 0 &                   # ... 8 of these
    python examples/rlx/cartpole_client.py --address 10.0.0.5:7070 --token-file token --seed 1

Plays episodes until the server stops (it stops at its target return, its step budget or Ctrl-C),
then prints one JSON line: episodes played, the mean return of the last 20, steps.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

import parl.rlx
from parl.rlx.address import DEFAULT_ADDRESS
from parl.rlx.errors import BUSY


def connect(address: str, token: Optional[bytes], wait: float) -> parl.rlx.Client:
    """A client of the server at ``address``, retrying for ``wait`` seconds while it does not listen
    yet or is busy."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return parl.rlx.Client(address, token)
        except (ConnectionRefusedError, parl.rlx.ServerError) as exc:
            busy = isinstance(exc, ConnectionRefusedError) or exc.code == BUSY
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=DEFAULT_ADDRESS, help="the server's host:port (default %(default)s)")
    parser.add_argument("--token-file", help="a file holding the server's token")
    parser.add_argument("--seed", type=int, default=0, help="seeds the environment's first reset")
    parser.add_argument("--episodes", type=int, help="episodes to play (default: until the server stops)")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to retry while the server is not up")
    args = parser.parse_args(argv)
    token = Path(args.token_file).read_bytes().strip() if args.token_file else None
    with connect(args.address, token, args.wait) as client:
        episodes = parl.rlx.drive(gym.make("CartPole-v1"), client, episodes=args.episodes, seed=args.seed)
    returns = [e.episode_return for e in episodes]
    print(
        json.dumps(
            {
                "episodes": len(episodes),
                "steps": int(sum(e.length for e in episodes)),
                "last_20_mean_return": float(np.mean(returns[-20:])) if returns else None,
                "act_latency_ms": float(np.median([e.act_latency_ms for e in episodes])) if episodes else None,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
