"""PredictOnlyHelper: acts through its task and keeps and sends nothing (a self-play opponent's helper).

    helpers = {"player_1": parl.OnPolicyHelper(), "player_2": parl.PredictOnlyHelper()}
    manager.add_agent(agent, helpers, tasks={"player_1": "RL", "player_2": "opponent"})

Its predictions batch with every other request of its task, as any helper's; what the agent stores
through it is checked against the specs and dropped, and :meth:`PredictOnlyHelper.learn` sends nothing, so its task
never learns from it.
"""

from __future__ import annotations

import numpy as np

from parl.core.agent_helper import AgentHelper
from parl.core.batch import Transition


class PredictOnlyHelper(AgentHelper):
    """A helper that predicts and never learns: its transitions are checked and dropped, :meth:`learn`
    returns None."""

    learns = False

    def _store(self, transition: Transition[np.ndarray], episode_over: bool) -> None:
        """Dropped (checked against the specs by ``store_data``, as every helper's): no step is learned from."""

    def learn(self) -> None:
        """Sends nothing: the helper's task learns nothing from it."""
        return None
