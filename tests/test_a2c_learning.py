"""Learning test: A2C reaches a greedy 475 on CartPole-v1 within an env-step budget.

One self-checking agent (tests/learning.py), so the run is deterministic;
examples/a2c_cartpole.py covers the multi-agent case it is tuned for.
"""

from __future__ import annotations

import gymnasium as gym
from learning import load_example, run_single_agent, self_checking

import parl
from parl.utils import GymAgent

STEP_BUDGET = 40_000
TARGET = 475.0


def test_a2c_reaches_greedy_475_within_step_budget() -> None:
    example = load_example("a2c_cartpole")
    s = example.Settings(agents=1)
    parl.seed_everything(0)
    agent_class = self_checking(GymAgent, example.make_env, budget=STEP_BUDGET, target=500)
    result = run_single_agent(
        example.make_settings(s),
        agent_class(gym.make("CartPole-v1"), seed=0),
        example.make_helper(s, seed=0),
        example.make_env,
        budget=STEP_BUDGET,
    )
    # Measured: 715 env steps and 16 updates, then 500 in every evaluation episode (same on every run);
    # with sample_interval=32 instead of the example's 64: 6,738 steps and 252 updates.
    assert result["mean"] >= TARGET, result
