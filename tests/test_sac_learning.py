"""Learning test: SAC reaches a deterministic 10-episode mean of -200 on Pendulum-v1 within an env-step budget.

One self-checking agent (tests/learning.py), so the run is deterministic;
examples/sac_pendulum.py covers the example's own settings and the benchmark.
"""

from __future__ import annotations

import gymnasium as gym
from learning import EXAMPLES, load_example, run_single_agent, self_checking

import parl

STEP_BUDGET = 6_000
TARGET = -200.0
# A greedy Pendulum episode of a good policy scores 0 to about -250 depending on its start (-1000
# or worse where it fails to swing up), so the self-check asks 5 episodes in a row of at least -250.
CHECK_TARGET = -250.0


def test_sac_reaches_deterministic_minus_200_within_step_budget(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the example imports examples/continuous_control.py
    example = load_example("sac_pendulum")
    s = example.Settings()
    parl.seed_everything(0)
    agent_class = self_checking(example.RandomStartAgent, example.make_env, budget=STEP_BUDGET, target=CHECK_TARGET)
    agent = agent_class(gym.make("Pendulum-v1"), random_steps=s.random_steps, seed=0)
    result = run_single_agent(
        example.continuous_control.make_settings(s, example.make_algorithm_func(s)),
        agent,
        example.continuous_control.make_helper(s, seed=0),
        example.make_env,
        budget=STEP_BUDGET,
    )
    # Measured: checks after 1,000 and 2,000 env steps, stopping at 2,000 env steps and 1,001 updates,
    # then a mean of -146.4 over the 10 evaluation episodes (same on every run).
    assert result["mean"] >= TARGET, result
