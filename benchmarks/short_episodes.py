"""A robot of many agents on a cheap environment with short episodes, for long and wide runs.

    from short_episodes import build_robot
    manager, agents = build_robot(num_agents=256, episode_steps=10, thread_placement="os")
    manager.start(); ...; manager.stop()
    steps = sum(agent.steps for agent in agents)

:class:`ShortEpisodeEnv` costs a few microseconds per step (no gymnasium wrappers), so the robot's
own work (threads, batching, records) is what a run measures. Agents act with the 64-64 MLP of
benchmarks/throughput.py (DQN's greedy predict) and never learn.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from throughput import PredictOnlyHelper, SteppingAgent, algorithm_func  # noqa: E402

import parl  # noqa: E402

#: Env steps per episode unless told otherwise.
EPISODE_STEPS = 10


class ShortEpisodeEnv:
    """Gymnasium-style episodes of ``episode_steps`` steps over a fixed 4-float observation, reward 1."""

    def __init__(self, episode_steps: int = EPISODE_STEPS) -> None:
        self.episode_steps = episode_steps
        self.t = 0
        self.obs = np.zeros(4, np.float32)

    def reset(self, seed: Optional[int] = None) -> Tuple[np.ndarray, Dict[str, Any]]:
        self.t = 0
        return self.obs, {}

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        self.t += 1
        return self.obs, 1.0, self.t >= self.episode_steps, False, {}


def build_robot(
    num_agents: int,
    episode_steps: int = EPISODE_STEPS,
    *,
    placement: str = "threads",
    thread_placement: Optional[str] = None,
    episode_window: Optional[int] = None,
    max_batchsize: int = 256,
) -> Tuple[parl.Manager, List[SteppingAgent]]:
    """A Manager with ``num_agents`` predict-only agents on :class:`ShortEpisodeEnv` (not started).

    ``thread_placement`` and ``episode_window`` None keep the Manager's defaults.
    """
    options: Dict[str, Any] = {"placement": placement}
    if thread_placement is not None:
        options["thread_placement"] = thread_placement
    if episode_window is not None:
        options["episode_window"] = episode_window
    manager = parl.Manager(
        {"RL": parl.TaskSettings(algorithm_func, batching=parl.Batching(max_batchsize=max_batchsize))}, **options
    )
    agents = [SteppingAgent(ShortEpisodeEnv(episode_steps), seed=i) for i in range(num_agents)]
    for agent in agents:
        manager.add_agent(agent, {"RL": PredictOnlyHelper()})
    return manager, agents
