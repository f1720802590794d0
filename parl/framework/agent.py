"""Agent: runs episodes in one environment copy.

    class CartPoleAgent(parl.Agent):
        def run_one_episode(self):
            obs, _ = self.reset_env()
            total, steps, done = 0.0, 0, False
            while not done:
                actions, _ = self.helpers["RL"].predict({"obs": obs})
                next_obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
                self.helpers["RL"].store_data({"obs": obs}, actions, reward, {"obs": next_obs},
                                              terminated, truncated)
                self.helpers["RL"].learn()
                obs, total, steps, done = next_obs, total + reward, steps + 1, terminated or truncated
            return {"reward": total, "steps": steps}

The agent knows nothing of batching or threads: :class:`~parl.Manager` runs
``run_one_episode`` ``num_games`` times in the agent's own thread and
records what it returns.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from parl.framework.agent_helper import AgentHelper
from parl.framework.validation import check_int


class Agent:
    """Base class of agents; subclasses implement :meth:`run_one_episode`."""

    def __init__(self, env: Any, *, num_games: Optional[int] = None, seed: Optional[int] = None) -> None:
        self.env = env
        self.num_games = None if num_games is None else check_int("num_games", num_games, 0)
        self.seed = seed
        self.helpers: Dict[str, AgentHelper] = {}
        self.id = -1
        self.episode = 0

    def run_one_episode(self) -> Dict[str, float]:
        """Play one episode; return its statistics (at least ``reward`` and ``steps``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement run_one_episode()")

    def reset_env(self) -> Tuple[Any, Dict[str, Any]]:
        """``env.reset()``, seeded with ``self.seed`` on the agent's first episode."""
        if self.episode == 0 and self.seed is not None:
            return self.env.reset(seed=self.seed)
        return self.env.reset()
