"""Learning tests: each shipped example robot reaches its target on most of several seeds within a step budget.

A run on one seed is not a portable test: float kernels differ between CPUs
(Intel and AMD, oneDNN and MKL builds), so the same seed follows another
trajectory on another machine, and with several agents thread timing already
changes it from run to run. Each case therefore trains the example's config
as a user runs it (``examples/configs/<example>.yaml`` through the Trainer, its
values unchanged but for the seed, budget, target and log dir unless stated)
on seeds that were not used to tune it, and asserts that at least
``min_reached`` of them stop at the target: an evaluation of 10 deterministic
episodes confirmed on 50 more (``parl.experiment.evaluation.greedy.confirmed_check``). The budgets are about
twice the most env steps any measured seed needed (see each case), so a
seed fails only when the algorithm really fails on it; runs stop at the
target, and the test stops once the outcome is decided, so a passing test
costs the steps to the target of a few seeds, not the budgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from learning import train_example_config


@dataclass(frozen=True)
class Case:
    """One example's learning test.

    Attributes:
        example: the config under ``examples/configs/``, without ``.yaml``.
        target: the mean deterministic return its check and confirmation must reach.
        budget: env steps (all agents together) per seed: about twice the most any measured seed needed.
        measured: what the seeds measured reached, for the record (env steps to the target).
        overrides: config values to change (``key.path=value``).
        seeds: seeds trained, none of them used to tune the example.
        min_reached: seeds that must reach the target, so that the measured rate of failing seeds
            seldom fails the test: with 1 seed in 10 failing, 2 or more of 4 fail 5 times in 100, 3 or
            more 4 times in 1,000.
    """

    example: str
    target: float
    budget: int
    measured: str
    overrides: Tuple[str, ...] = ()
    seeds: Tuple[int, ...] = (100, 101, 102, 103)
    min_reached: int = 2


# Measured on AMD EPYC (2 cores), 2026-11-24, seeds 0-9 in each run (benchmarks/compare.py while its stop
# rule and settings were refined, and for DQN the settings table of docs/benchmarks.md); steps are to the stop.
CASES = [
    Case("pg_cartpole", 475.0, 160_000, "20/20 reached over two runs, 5.2k-81.0k env steps (median 7k)", min_reached=3),
    Case("a2c_cartpole", 475.0, 40_000, "10/10 reached, 4.1k-17.5k env steps (median 6.2k)", min_reached=3),
    Case(
        "ppo_cartpole", 475.0, 60_000, "40/40 reached over four runs, 6.5k-31.5k env steps (median 16k)", min_reached=3
    ),
    # A seed in 30 to 40 stalls (a greedy return stuck below 400 for the whole budget): 2 of 4 must reach.
    Case("dqn_cartpole", 475.0, 150_000, "29/30 reached over three runs, 21.3k-107.3k env steps (median 35k)"),
    Case(
        "sac_pendulum", -200.0, 15_000, "33/33 reached over four runs, 2.0k-7.0k env steps (median 3k)", min_reached=3
    ),
    # Pixels: MinAtar Breakout's 10x10 frames (the minatar extra), a greedy return of 2.0 where a random policy
    # scores 0.39; evaluated every 2,000 steps so that a seed stops soon after it gets there (30-50 s a seed).
    # Measured on the test's own seeds (AMD EPYC, 2 cores shared); the config's values were set with one run, seed 0.
    Case(
        "dqn_minatar",
        2.0,
        15_000,
        "4/4 reached (seeds 100-103), 5.0k-7.0k env steps; 2.5-3.6 at the stop, 2.5-3.3 on 50 fresh episodes",
        overrides=("evaluation.every_steps=2000",),
    ),
    # A Dict observation (examples/dict_grid_env.py: a uint8 image and a goal vector, both needed; the best
    # return is about 0.94, a policy blind to the vector about 0). Measured on the test's own seeds, 2026-11-27.
    Case(
        "dqn_dict_obs",
        0.8,
        10_000,
        "10/10 reached (seeds 100-109), 2.9k-5.0k env steps; 0.94-0.95 on 100 fresh episodes",
        min_reached=3,
    ),
]


#: The longest of these checks (budgets of 100k+ env steps, often a minute or two): ``make test-long`` runs them,
#: ``make test`` leaves them out (``make demo`` trains DQN CartPole too; dqn_minatar and dqn_dict_obs keep a DQN
#: learning check in ``make test``).
LONG = ("dqn_cartpole",)


@pytest.mark.parametrize(
    "case",
    [pytest.param(case, marks=pytest.mark.long) if case.example in LONG else case for case in CASES],
    ids=[case.example for case in CASES],
)
def test_the_example_reaches_its_target_on_most_seeds(case: Case, tmp_path: Path) -> None:
    results: List[Dict[str, Any]] = []
    for seed in case.seeds:
        result = train_example_config(
            case.example, tmp_path, seed=seed, budget=case.budget, target=case.target, overrides=case.overrides
        )
        results.append(result)
        assert result["env_steps"] <= case.budget + 1_000  # the budget held (an episode ends whole)
        reached, left = sum(r["reached"] for r in results), len(case.seeds) - len(results)
        if reached >= case.min_reached or reached + left < case.min_reached:
            break  # the seeds left cannot change the outcome
    summary = [{key: r[key] for key in ("seed", "env_steps", "updates", "best_eval", "final_eval")} for r in results]
    assert sum(r["reached"] for r in results) >= case.min_reached, summary
