"""Learning tests: each shipped example reaches its target on most of several seeds within a step budget.

A run on one seed is not a portable test: float kernels differ between CPUs
(Intel and AMD, oneDNN and MKL builds), so the same seed follows another
trajectory on another machine, and with several agents thread timing already
changes it from run to run. Each case therefore trains the example as a user
runs it (its own ``train``, its default settings unless stated) on seeds
that were not used to tune it, and asserts that at least ``min_reached`` of
them stop at the target: a check of 10 deterministic episodes confirmed on
10 more (``parl.utils.evaluation.confirmed_check``). The budgets are about
twice the most env steps any measured seed needed (see each case), so a
seed fails only when the algorithm really fails on it; runs stop at the
target, and the test stops once the outcome is decided, so a passing test
costs the steps to the target of a few seeds, not the budgets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import pytest
from learning import load_example


@dataclass(frozen=True)
class Case:
    """One example's learning test.

    Attributes:
        example: the file under ``examples/``, without ``.py``.
        target: the mean deterministic return its check and confirmation must reach.
        budget: env steps (all agents together) per seed: about twice the most any measured seed needed.
        measured: what the seeds measured reached, for the record (env steps to the target).
        settings: fields of the example's ``Settings`` to change.
        seeds: seeds trained, none of them used to tune the example.
        min_reached: seeds that must reach the target, so that the measured rate of failing seeds
            seldom fails the test: with 1 seed in 10 failing, 2 or more of 4 fail 5 times in 100, 3 or
            more 4 times in 1,000.
    """

    example: str
    target: float
    budget: int
    measured: str
    settings: Dict[str, Any] = field(default_factory=dict)
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
]


@pytest.mark.parametrize("case", CASES, ids=[case.example for case in CASES])
def test_the_example_reaches_its_target_on_most_seeds(case: Case) -> None:
    example = load_example(case.example)
    results: List[Dict[str, Any]] = []
    for seed in case.seeds:
        settings = example.Settings(**case.settings)
        result = example.train(seed=seed, max_steps=case.budget, target=case.target, settings=settings, verbose=False)
        results.append(result)
        assert result["env_steps"] <= case.budget + 1_000  # the budget held (an episode ends whole)
        reached, left = sum(r["reached"] for r in results), len(case.seeds) - len(results)
        if reached >= case.min_reached or reached + left < case.min_reached:
            break  # the seeds left cannot change the outcome
    summary = [
        {key: round(r[key], 1) for key in ("seed", "env_steps", "updates", "greedy_check", "greedy_mean_return")}
        for r in results
    ]
    assert sum(r["reached"] for r in results) >= case.min_reached, summary
