"""Exact score of trained tic-tac-toe policies against a uniform random player, and where they lose.

    python benchmarks/tictactoe_exact.py runs/selfplay/seed-20 runs/selfplay/seed-21

Each argument is the log directory of a run of examples/configs/ppo_tictactoe_selfplay.yaml (as
``benchmarks/selfplay.py`` leaves them: ``OUT/seed-S``). Its latest checkpoint's greedy policy plays
every game against a player that picks uniformly among the legal squares, first and second; the
expected score, (wins + draws / 2), is summed exactly over the game tree (no sampling). The table also
gives the probability that a game reaches a position where the random player threatens three in a row,
the policy cannot win at once, and the policy does not block: the missed blocks.

``--reference`` prints the same for a perfect minimax player that breaks ties uniformly at random, and
the best score any policy can reach against the random player (expectimax).

Observations are built as PettingZoo's tictactoe_v3 builds them (planes: the mover's marks, the other
player's; square ``i`` at row ``i // 3``, column ``i % 3``); the script checks that against the
environment on random games before it starts.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from parl.multiagent.versus import greedy_player

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
Board = Tuple[int, ...]  # 0 empty, 1 the first player's mark, 2 the second's
Policy = Callable[[Board, int], List[int]]  # board, mover -> the squares it may play (each equally likely)


def observation(board: Board, mover: int) -> Dict[str, np.ndarray]:
    """What tictactoe_v3 shows ``mover`` (1 or 2) at ``board``."""
    squares = np.asarray(board).reshape(3, 3)
    planes = np.stack([squares == mover, squares == 3 - mover], axis=2).astype(np.int8)
    return {"observation": planes, "action_mask": (np.asarray(board) == 0).astype(np.int8)}


def check_observations(games: int = 20, seed: int = 0) -> None:
    """Raise if :func:`observation` differs from the environment's on random games."""
    from pettingzoo.classic import tictactoe_v3

    rng = np.random.default_rng(seed)
    env = tictactoe_v3.env()
    for game in range(games):
        env.reset(seed=game)
        board = [0] * 9
        for agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            mover = env.possible_agents.index(agent) + 1
            if terminated or truncated:
                env.step(None)
                continue
            mine = observation(tuple(board), mover)
            for key in ("observation", "action_mask"):
                if not np.array_equal(np.asarray(obs[key], np.int8), mine[key]):
                    raise RuntimeError(f"tictactoe_v3's {key} differs from this script's at {board}: {obs[key]}")
            square = int(rng.choice(np.flatnonzero(mine["action_mask"])))
            board[square] = mover
            env.step(square)


def winner(board: Board) -> int:
    for a, b, c in LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return 0


def final_score(board: Board, seat: int) -> Optional[float]:
    """``seat``'s score of a finished game (1 won, 0.5 drawn, 0 lost); None while it goes on."""
    won = winner(board)
    if won:
        return 1.0 if won == seat else 0.0
    return 0.5 if all(board) else None


def threats(board: Board, who: int) -> List[int]:
    """The empty squares that would complete a line of ``who``."""
    out = []
    for line in LINES:
        marks = [board[i] for i in line]
        if marks.count(who) == 2 and marks.count(0) == 1:
            out.append(line[marks.index(0)])
    return sorted(set(out))


def play(board: Board, square: int, who: int) -> Board:
    return board[:square] + (who,) + board[square + 1 :]


def exact(policy: Policy, seat: int) -> Tuple[float, float]:
    """Expected score of ``policy`` moving ``seat`` (1 first, 2 second) against the random player, and
    the probability of reaching a missed block."""
    missed = 0.0

    @functools.lru_cache(maxsize=None)
    def value(board: Board, mover: int) -> float:
        final = final_score(board, seat)
        if final is not None:
            return final
        if mover == seat:
            choices = policy(board, mover)
        else:
            choices = [i for i, v in enumerate(board) if not v]
        return sum(value(play(board, i, mover), 3 - mover) for i in choices) / len(choices)

    def walk(board: Board, mover: int, reach: float) -> None:
        nonlocal missed
        if final_score(board, seat) is not None:
            return
        if mover == seat:
            choices = policy(board, mover)
            open_threats = threats(board, 3 - mover)
            if open_threats and not threats(board, mover) and not any(c in open_threats for c in choices):
                missed += reach
                return  # counted once per game: the first missed block
        else:
            choices = [i for i, v in enumerate(board) if not v]
        for square in choices:
            walk(play(board, square, mover), 3 - mover, reach / len(choices))

    empty: Board = (0,) * 9
    score = value(empty, 1)
    walk(empty, 1, 1.0)
    return score, missed


def trained_policy(log_dir: str, task: str) -> Policy:
    """The greedy move of ``task`` in the run at ``log_dir``."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from selfplay import trained_task

    act = greedy_player(trained_task(log_dir, task))
    return lambda board, mover: [act(observation(board, mover))]


def minimax_policy() -> Policy:
    """Every move of best game value (win 1, draw 0, loss -1), both sides playing perfectly."""

    @functools.lru_cache(maxsize=None)
    def negamax(board: Board, mover: int) -> int:
        won = winner(board)
        if won:
            return 1 if won == mover else -1
        if all(board):
            return 0
        return max(-negamax(play(board, i, mover), 3 - mover) for i, v in enumerate(board) if not v)

    def moves(board: Board, mover: int) -> List[int]:
        scored = {i: -negamax(play(board, i, mover), 3 - mover) for i, v in enumerate(board) if not v}
        best = max(scored.values())
        return [i for i, v in scored.items() if v == best]

    return moves


def best_score(seat: int) -> float:
    """The most any policy can score moving ``seat`` against the random player (expectimax)."""

    @functools.lru_cache(maxsize=None)
    def value(board: Board, mover: int) -> float:
        final = final_score(board, seat)
        if final is not None:
            return final
        nexts = [value(play(board, i, mover), 3 - mover) for i, v in enumerate(board) if not v]
        return max(nexts) if mover == seat else sum(nexts) / len(nexts)

    return value((0,) * 9, 1)


def row(name: str, policy: Policy) -> str:
    (first, missed_first), (second, missed_second) = exact(policy, 1), exact(policy, 2)
    return (
        f"| {name} | {first:.3f} | {second:.3f} | {(first + second) / 2:.3f} | "
        f"{missed_first:.3f} | {missed_second:.3f} |"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", help="log directories of tic-tac-toe runs")
    parser.add_argument("--task", default="RL")
    parser.add_argument("--reference", action="store_true", help="also the minimax player and the best score")
    args = parser.parse_args(argv)
    if not args.runs and not args.reference:
        parser.error("give run directories, --reference, or both")
    check_observations()
    print("| policy | first | second | both seats | missed blocks, first | missed blocks, second |")
    print("|---|---|---|---|---|---|")
    if args.reference:
        print(row("minimax, random ties", minimax_policy()))
        print(
            f"| best possible | {best_score(1):.3f} | {best_score(2):.3f} | "
            f"{(best_score(1) + best_score(2)) / 2:.3f} | | |"
        )
    for log_dir in args.runs:
        print(row(log_dir, trained_policy(log_dir, args.task)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
