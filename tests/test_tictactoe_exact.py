"""benchmarks/tictactoe_exact.py: its observations are tictactoe_v3's, and its exact scores against a
uniform random player are the known ones (a random player's, a perfect minimax player's) and find
missed blocks."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
exact_module = importlib.import_module("tictactoe_exact")


def test_observations_match_the_environment() -> None:
    exact_module.check_observations(games=5)


def test_exact_scores_of_known_players() -> None:
    def uniform(board, mover):
        return [i for i, v in enumerate(board) if not v]

    first, missed = exact_module.exact(uniform, 1)
    second, _ = exact_module.exact(uniform, 2)
    # Random against random: the first player wins 737/1260 of games and draws 160/1260 (the known
    # probabilities, 58.5% and 12.7%), so it scores (737 + 80) / 1260 and the second the rest.
    assert first == pytest.approx(817 / 1260, abs=1e-9) and second == pytest.approx(1 - first, abs=1e-9)
    assert (
        missed == 0.0
    )  # a miss is a position where none of the policy's moves blocks: one of the random player's does
    minimax = exact_module.minimax_policy()
    assert exact_module.exact(minimax, 1) == pytest.approx((0.984, 0.0), abs=5e-4)
    assert exact_module.exact(minimax, 2) == pytest.approx((0.889, 0.0), abs=5e-4)
    assert exact_module.best_score(1) == pytest.approx(0.997, abs=5e-4)
    assert exact_module.best_score(2) == pytest.approx(0.962, abs=5e-4)


def test_a_policy_that_never_blocks_is_caught() -> None:
    def first_free(board, mover):
        return [next(i for i, v in enumerate(board) if not v)]

    score, missed = exact_module.exact(first_free, 2)
    assert missed > 0.3 and score < 0.7
