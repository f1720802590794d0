"""PredictOnlyHelper: acts through its task and keeps and sends nothing (a self-play opponent's helper).

    helpers = {"player_1": parl.OnPolicyHelper(), "player_2": parl.PredictOnlyHelper()}
    manager.add_agent(agent, helpers, tasks={"player_1": "RL", "player_2": "opponent"})

Its predictions batch with every other request of its task, as any helper's; what the agent stores
through it is dropped unchecked, and :meth:`PredictOnlyHelper.learn` sends nothing, so its task
never learns from it.
"""

from __future__ import annotations

from typing import Mapping, Optional

from parl.core.agent_helper import AgentHelper, Rewards


class PredictOnlyHelper(AgentHelper):
    """A helper that predicts and never learns: its transitions are dropped, :meth:`learn` returns None."""

    learns = False

    def store_data(
        self,
        inputs: Mapping[str, object],
        actions: Mapping[str, object],
        rewards: Rewards,
        next_inputs: Mapping[str, object],
        terminated: bool,
        truncated: bool,
        states: Optional[Mapping[str, object]] = None,
        next_states: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Nothing is kept (nor checked): no step is learned from."""

    def learn(self) -> None:
        """Sends nothing: the helper's task learns nothing from it."""
        return None
