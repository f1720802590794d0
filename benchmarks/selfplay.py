"""Self-play on a turn-based game: train a config on several seeds, then play each trained policy
(greedy) against a uniform random legal player, first and second, and print a table.

    PYTHONPATH=<tree> python benchmarks/selfplay.py examples/configs/ppo_tictactoe_selfplay.yaml \\
        --seeds 20 21 22 --steps 100000 --games 500 --out /tmp/selfplay

Each seed is one ``parl train CONFIG -o seed=S -o train.max_env_steps=STEPS`` run (a child process,
as a user runs it), in ``OUT/seed-S``; its final checkpoint's task ``--task`` is then loaded into a task
built from the run's config and played by :func:`parl.multiagent.versus.play_against_random`. The
table gives per seed and seat the wins, draws and losses and the score, (wins + draws / 2) / games, and
each run's wall time. ``-o KEY=VALUE`` (repeatable) changes a config value in every run, as ``parl
train -o`` does (``-o tasks.RL.algorithm.learning_rate=3e-4 -o agents=32``). ``--target`` (default
0.9) is what a score must reach; the script exits 1 when a seed's score (both seats together) falls
below it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
from typing import Any, Callable, List, Sequence, Tuple

import parl
from parl.experiment.config import load_config
from parl.experiment.config.build import task_settings
from parl.multiagent import SeatSwap
from parl.multiagent.versus import Tally, greedy_player, play_against_random


def train(config: str, seed: int, steps: int, log_dir: str, overrides: Sequence[str] = ()) -> float:
    """One ``parl train`` run; its wall time in seconds. ``overrides`` (``key=value``) go to ``parl train``
    as ``-o key=value``, before the seed, the budget and the log directory, which they cannot change."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "parl", "train", config, "--quiet"]
    for override in overrides:
        command += ["-o", override]
    command += ["-o", f"seed={seed}", "-o", f"train.max_env_steps={steps}", "-o", f"log_dir={log_dir}"]
    subprocess.run(command, check=True)
    return time.perf_counter() - start


def trained_task(log_dir: str, task: str) -> parl.ComputationTask:
    """Task ``task`` of the run in ``log_dir``, with its latest checkpoint's weights."""
    config = load_config(os.path.join(log_dir, "config.yaml"))
    checkpoints = os.path.join(log_dir, "checkpoints")
    with open(os.path.join(checkpoints, "latest")) as latest:
        name = latest.read().strip()
    out = task_settings(config, task).make_task(task)
    out.load(os.path.join(checkpoints, name, f"{task}.json"))
    return out


def fixed_seats(make_env: Callable[[], Any]) -> Callable[[], Any]:
    """``make_env`` without its :class:`~parl.multiagent.SeatSwap` (whose ids trade seats every game),
    so that a seat stays one seat over the games played against the random player."""

    def make() -> Any:
        env = make_env()
        return env.env if isinstance(env, SeatSwap) else env

    return make


def imported(path: str) -> Callable[[], Any]:
    """The function at import path ``path`` (``package.module.function``)."""
    module_name, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--seeds", type=int, nargs="+", default=[10, 11, 12])
    parser.add_argument("--steps", type=int, default=100_000, help="env steps (turns) of each run")
    parser.add_argument("--games", type=int, default=500, help="games per seat")
    parser.add_argument("--task", default="RL")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--out", default="runs/selfplay")
    parser.add_argument(
        "--game",
        default=None,
        metavar="MODULE.FUNCTION",
        help="the import path of a function that makes the env the policy plays the random player on "
        "(default: the config's env without its SeatSwap), e.g. pettingzoo.classic.tictactoe_v3.env where "
        "the config's env wraps the game for training only",
    )
    parser.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override passed to every 'parl train' run as '-o KEY=VALUE' (repeatable), "
        "e.g. -o tasks.RL.algorithm.learning_rate=3e-4; seed, train.max_env_steps and log_dir are the script's",
    )
    args = parser.parse_args(argv)
    config = load_config(args.config)
    make_game = fixed_seats(config.env.make) if args.game is None else imported(args.game)
    rows: List[Tuple[int, str, Tally, float]] = []
    for seed in args.seeds:
        log_dir = os.path.join(args.out, f"seed-{seed}")
        seconds = train(args.config, seed, args.steps, log_dir, args.override)
        player = greedy_player(trained_task(log_dir, args.task))
        for seat, name in ((0, "first"), (1, "second")):
            tally = play_against_random(make_game, player, games=args.games, seat=seat, seed=10_000 * seed + seat)
            rows.append((seed, name, tally, seconds))
    print(f"{args.steps} env steps per run, {args.games} games per seat")
    print("| seed | seat | wins | draws | losses | score | train s |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for seed, seat, tally, seconds in rows:
        print(
            f"| {seed} | {seat} | {tally.wins} | {tally.draws} | {tally.losses} | {tally.score:.3f} | {seconds:.0f} |"
        )
    for seed in args.seeds:
        both = [tally for s, _, tally, _ in rows if s == seed]
        score = sum(t.wins + 0.5 * t.draws for t in both) / sum(t.games for t in both)
        print(f"seed {seed}: score over both seats {score:.3f}")
        failed = failed or score < args.target
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
