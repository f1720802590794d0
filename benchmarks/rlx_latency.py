"""Action round trips and env steps per second of an RLX server (``parl serve``) and client processes, on loopback.

    python benchmarks/rlx_latency.py                        # 1 and 32 clients, every mode, 3 slices of 5 s
    python benchmarks/rlx_latency.py --clients 32 --modes acting --slices 5
    python benchmarks/rlx_latency.py --clients 32 -o thread_placement=os     # -o: a config override for the servers

Each row starts ``parl serve`` (CartPole-v1's spaces, ``--max-clients`` = the clients, no
evaluation) and that many client processes, each one ``parl.rlx.Client`` playing its own
gymnasium CartPole-v1 in a loop. The clients connect, warm up, wait until all are connected, then play
on while ``--slices`` slices of ``--seconds`` each are measured; each records every request's round
trip as it sees it (encoding, network, the server, decoding). The table gives the env steps per second of all clients
together (the median over the slices, each slice's rate at the end of the row), the median,
99th percentile and largest round trip over all requests, the server's own part of each action
(``rlx/act_latency_ms``: from reading the request to writing the action) from its metrics, the CPU
time per env step of the server process and of all clients together (what the work costs, which
other jobs on the machine change less than they change the rates), and the 1-minute load average
at the end of the row (the machine's other jobs count in it).

Modes (the server's robot):
- ``acting``: the 64-64 MLP of dqn_cartpole.yaml acting greedily (GymAgent), never learning: the
  serving path alone.
- ``ppo``: examples/configs/ppo_cartpole.yaml as it is: every client's 32-step segment joined into
  one synchronous update, which every client waits for.
- ``dqn``: examples/configs/dqn_cartpole.yaml as it is: epsilon-greedy, replay, an update every
  other step per client once its 500-step warm-up is done.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from parl.experiment.cli.serve_process import start_serve

REPO = Path(__file__).resolve().parents[1]
#: Server configs and overrides per mode.
MODES: Dict[str, List[str]] = {
    "acting": [
        "examples/configs/dqn_cartpole.yaml",
        "-o",
        "agent={class: parl.utils.GymAgent}",
        "-o",
        "tasks.RL.helper.warmup_steps=1000000000",
    ],
    "ppo": ["examples/configs/ppo_cartpole.yaml"],
    "dqn": ["examples/configs/dqn_cartpole.yaml"],
}
#: Seconds between two rows of the server's metrics (parl serve's task rows).
METRIC_SECONDS = 2.0
#: Seconds the clients play after "go" before the first slice, and after the last before "stop".
SETTLE_SECONDS = 1.0
#: Requests each client makes before the measurement starts.
WARM_UP_STEPS = 200
COMMON = [
    "-o",
    "train.max_env_steps=1000000000",
    "-o",
    "train.target_return=null",
    "-o",
    "checkpoint.every_minutes=null",
]


def client_main(address: str, seed: int, out: str) -> None:
    """One client process: connect, warm up, say "ready", wait for "go" on stdin, then play until "stop"
    arrives; save to ``out`` (.npy) this process's CPU seconds and env steps from go to stop, then for
    every request its end time (Unix seconds), round trip (seconds) and whether it was an env step."""
    import gymnasium as gym

    import parl.rlx

    env = gym.make("CartPole-v1")
    client = parl.rlx.Client(address)
    player = Player(env, client, seed)
    player.play(threading.Event(), steps=WARM_UP_STEPS)  # the server's first predictions build its layers
    print("ready", flush=True)
    sys.stdin.readline()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    cpu, steps, start = time.process_time(), player.steps, len(player.records)
    player.play(stop)
    cpu, steps = time.process_time() - cpu, player.steps - steps
    client.disconnect()
    np.save(out, np.asarray([(cpu, steps, 0.0), *player.records[start:]]))


class Player:
    """Plays CartPole through an RLX client, episode after episode, keeping for every request its end
    time, round trip and whether it was an env step (``records``)."""

    def __init__(self, env, client, seed: int) -> None:
        self.env, self.client = env, client
        obs, _ = env.reset(seed=seed)
        self.action = client.init(obs)
        self.steps = 0
        self.records: List[Tuple[float, float, float]] = []

    def play(self, stop: threading.Event, steps: Optional[int] = None) -> None:
        """Until ``stop`` is set, or ``steps`` env steps."""
        env, client, records = self.env, self.client, self.records
        while not stop.is_set() and (steps is None or self.steps < steps):
            obs, reward, terminated, truncated, _ = env.step(self.action)
            self.steps += 1
            if terminated or truncated:
                client.reset(reward, truncated=truncated and not terminated, obs=obs)
                records.append((time.time(), client.latency, 1.0))
                obs, _ = env.reset()
                self.action = client.init(obs)
                records.append((time.time(), client.latency, 0.0))
            else:
                self.action = client.send(reward, obs)
                records.append((time.time(), client.latency, 1.0))


def measure(
    mode: str, clients: int, seconds: float, slices: int, work: Path, overrides: Sequence[str]
) -> Dict[str, float]:
    """One row: the server of ``mode`` (with config ``overrides``) and ``clients`` client processes that
    play on while ``slices`` slices of ``seconds`` are measured (so no client waits for one that has
    stopped). Rates are the median over the slices; round trips are pooled over the slices."""
    log_dir = work / f"{mode}-{clients}"
    args = [*MODES[mode], "--bind", "127.0.0.1:0", "--max-clients", str(clients), "--no-eval", "--quiet"]
    command = [*args, *COMMON, "-o", f"log_dir={log_dir}"]
    for override in overrides:
        command += ["-o", override]
    server, address = start_serve(command, cwd=str(REPO), stderr=subprocess.DEVNULL)
    players: List[subprocess.Popen] = []
    outs = [work / f"{mode}-{clients}-{i}.npy" for i in range(clients)]
    try:
        for i, out in enumerate(outs):
            command = [sys.executable, __file__, "--client", address, "--seed", str(i), "--out", str(out)]
            pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
            players.append(subprocess.Popen(command, cwd=REPO, text=True, **pipes))
        for player in players:
            if player.stdout.readline().strip() != "ready":
                raise SystemExit("a client did not connect")
        tell(players, "go")
        start = time.time() + SETTLE_SECONDS
        bounds = [start + k * seconds for k in range(slices + 1)]
        server_cpu = []
        for bound in bounds:
            time.sleep(max(0.0, bound - time.time()))
            server_cpu.append(cpu_seconds(server.pid))
        time.sleep(SETTLE_SECONDS)
        tell(players, "stop")
        for player in players:
            player.wait()
        load = os.getloadavg()[0]
    finally:
        for process in [*players, server]:
            if process.poll() is None:
                process.terminate()
            process.wait()
    saved = [np.load(out) for out in outs]
    records = np.concatenate([s[1:] for s in saved])
    ends, latencies, stepped = records[:, 0], records[:, 1] * 1e3, records[:, 2]
    window = (ends >= bounds[0]) & (ends < bounds[-1])
    steps = [float(stepped[(ends >= a) & (ends < b)].sum()) for a, b in zip(bounds, bounds[1:])]
    cpu = [b - a for a, b in zip(server_cpu, server_cpu[1:])]
    return {
        "steps_per_second": float(np.median(steps)) / seconds,
        "rates": [n / seconds for n in steps],
        "server_cpu_us": 1e6 * float(np.median([c / n for c, n in zip(cpu, steps)])),
        "client_cpu_us": 1e6 * sum(float(s[0, 0]) for s in saved) / sum(float(s[0, 1]) for s in saved),
        "p50_ms": float(np.percentile(latencies[window], 50)),
        "p99_ms": float(np.percentile(latencies[window], 99)),
        "max_ms": float(latencies[window].max()),
        "server_ms": server_latency(log_dir / "metrics.jsonl", bounds[0], bounds[-1]),
        "load": load,
    }


def tell(players: Sequence[subprocess.Popen], word: str) -> None:
    """Write ``word`` as a line to every client."""
    for player in players:
        player.stdin.write(f"{word}\n")
        player.stdin.flush()


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system, every thread) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_latency(metrics: Path, start: float, end: float) -> float:
    """The server's mean ``rlx/act_latency_ms`` over its metric rows whose whole interval lies between
    ``start`` and ``end`` (Unix seconds)."""
    rows = [json.loads(line) for line in metrics.open()] if metrics.exists() else []
    values = [
        r["rlx/act_latency_ms"]
        for r in rows
        if "rlx/act_latency_ms" in r and start + METRIC_SECONDS <= r["time"] <= end
    ]
    return float(np.mean(values)) if values else float("nan")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of a slice (default %(default)s)")
    parser.add_argument("--slices", type=int, default=3, help="slices per row (default %(default)s)")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        client_main(args.client, args.seed, args.out)
        return
    columns = [("mode", 8), ("clients", 8), ("env steps/s", 13), ("p50 ms", 9), ("p99 ms", 9), ("max ms", 9)]
    columns += [("server ms", 11), ("server CPU us", 15), ("client CPU us", 15), ("load", 7), ("   slices", 0)]
    print("".join(name.ljust(width) if name == "mode" else name.rjust(width) for name, width in columns), flush=True)
    with tempfile.TemporaryDirectory(prefix="rlx-bench-") as work:
        for mode in args.modes:
            for clients in args.clients:
                r = measure(mode, clients, args.seconds, args.slices, Path(work), args.override)
                print(
                    f"{mode:<8}{clients:>8}{r['steps_per_second']:>13,.0f}{r['p50_ms']:>9.3f}{r['p99_ms']:>9.2f}"
                    f"{r['max_ms']:>9.1f}{r['server_ms']:>11.3f}{r['server_cpu_us']:>15.1f}{r['client_cpu_us']:>15.1f}"
                    f"{r['load']:>7.2f}   " + ", ".join(f"{rate:,.0f}" for rate in r["rates"]),
                    flush=True,
                )


if __name__ == "__main__":
    main()
