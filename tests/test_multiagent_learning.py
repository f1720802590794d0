"""Shared PPO learns cooperative MPE simple_spread (mpe2, 3 agents, 25-step episodes).

The measure is our ``reward``: the mean over the three agents of each one's own return per episode,
as the trainer logs it (``episode/reward``) while the policy acts stochastically. Uniformly random
actions score about -27 and standing still about -25. Within ``BUDGET`` env steps the return of the
last ``EPISODES`` training episodes rose above that of the first ``EPISODES`` by 4.1 to 6.9 in the
measured runs (``MEASURED``: runs of one seed differ, as the order in which its agents' segments
join an update does); each test seed must gain more than ``MIN_GAIN`` and end above ``THRESHOLD``,
which leave about 2 below the worst measured run's. At half this budget, 20,000 env steps, runs of
seeds 1 and 3 ended anywhere from -21.4 to -25.2 (a run still at standing still's return, under load),
so a threshold there failed now and then; at 40,000 every measured run ended within -20.8 to -22.4.
The greedy evaluation is a poorer measure this early (over 100 episodes it moved by 3 between two
runs of one seed); docs/multiagent.md has longer runs.

The example's own PPO settings are for the published budget of 2M env steps (4 minibatches a pass,
gradient norm 10, the learning rate annealed over the budget, discount 0.95): faster over hundreds of
thousands of steps, but within 40,000 two of six runs (seeds 1 and 7, discount 0.99) were still at
random play's return (-28.5, -28.3). This test runs the example with ``EARLY``, one minibatch a pass
and gradient norm 0.5 at a constant rate with discount 0.99, the settings ``MEASURED`` was taken
with, which leave random play within the budget in every measured run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import numpy as np
import pytest
from learning import train_example_config

#: Env steps per seed (one env step: all three agents act): 1,600 episodes over 16 env copies.
BUDGET = 40_000
#: Training episodes averaged at the start and at the end.
EPISODES = 64
#: Seed -> (first, last) mean agent return of EPISODES training episodes of runs at BUDGET (AMD EPYC, 2 cores,
#: two runs at a time; the last two of seed 1 beside two busy processes).
MEASURED = {
    1: [(-25.9, -21.7), (-28.2, -21.8), (-27.3, -22.1), (-26.6, -20.8), (-27.0, -21.3)],
    3: [(-27.3, -21.3), (-29.3, -22.4), (-28.3, -21.7)],
}
#: The PPO settings of the short run (see the module's docstring).
EARLY = (
    "tasks.RL.algorithm.num_minibatches=1",
    "tasks.RL.algorithm.grad_clip=0.5",
    "tasks.RL.algorithm.learning_rate_schedule=constant",
    "tasks.RL.algorithm.gamma=0.99",
)
#: The least gain from the first to the last EPISODES, and the least last mean, every seed must show.
MIN_GAIN = 2.0
THRESHOLD = -24.5


def training_returns(log_dir: Path) -> List[float]:
    """The ``episode/reward`` of every training episode in ``log_dir``'s metrics.jsonl, in order."""
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines() if line]
    return [float(row["episode/reward"]) for row in rows if "episode/reward" in row]


@pytest.mark.parametrize("seed", [1, 3])
def test_shared_ppo_improves_the_mean_agent_return(seed: int, tmp_path: Path) -> None:
    result = train_example_config(
        "ppo_simple_spread",
        tmp_path,
        seed=seed,
        budget=BUDGET,
        target=0.0,  # never reached: train the whole budget
        overrides=("evaluation.every_steps=null", "evaluation.final_episodes=1", *EARLY),
    )
    assert result["error"] is None and result["env_steps"] >= BUDGET
    returns = training_returns(tmp_path / f"ppo_simple_spread-s{seed}")
    assert len(returns) >= 4 * EPISODES
    first, last = float(np.mean(returns[:EPISODES])), float(np.mean(returns[-EPISODES:]))
    assert last - first > MIN_GAIN and last > THRESHOLD, (first, last)
