"""SeatSwap: a two-player turn-based (AEC) environment whose players change seats every episode.

    env = SeatSwap(tictactoe_v3.env())       # episode 0: player_1 moves first; episode 1: player_2 does
    agent = PettingZooAgent(env, policy_mapping={"player_1": "RL", "player_2": "opponent"})

A policy mapping binds a task to an agent id, and in a turn-based game the id is the seat; through
this wrapper the id ``player_1`` names the seat that moves first in even episodes and the other seat in
odd ones, so a learner mapped to one id plays both seats against a frozen opponent (self-play
against snapshots, docs/multiagent.md). Observations, rewards and flags are the wrapped env's, read
for the agent whose turn it is; the wrapped game must give both seats the same spaces. In a config:
``env: {factory: parl.multiagent.SeatSwap, kwargs: {env: pettingzoo.classic.tictactoe_v3.env}}``, where
``env`` is the import path of a function that makes the wrapped env.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

from parl.multiagent.envs import env_agent_ids, is_turn_based
from parl.utils.observations import import_function


class SeatSwap:
    """Wraps a two-player AEC env; agent ids trade seats on every reset (see the module docstring).

    Args:
        env: the env, or the import path (``"package.module.function"``) of a function that makes it.

    Raises:
        ValueError: ``env`` is not a turn-based PettingZoo env of exactly two agents, or a path that
            names nothing.
    """

    def __init__(self, env: Any) -> None:
        if isinstance(env, str):
            env = import_function(env, "SeatSwap env")()
        ids = env_agent_ids(env)
        if not is_turn_based(env) or len(ids) != 2:
            raise ValueError(f"SeatSwap takes a turn-based PettingZoo env of two agents, got {type(env).__name__}")
        self.env = env
        self.possible_agents: List[str] = ids
        self.metadata: Dict[str, Any] = getattr(env, "metadata", {})
        self._episodes = 0
        self._to_id: Dict[str, str] = {a: a for a in ids}  # the wrapped env's id -> the id shown

    @property
    def swapped(self) -> bool:
        """Whether the ids are traded in this episode (odd episodes)."""
        return self._to_id[self.possible_agents[0]] != self.possible_agents[0]

    @property
    def agents(self) -> List[str]:
        """The live agents, by the ids shown."""
        return [self._to_id[a] for a in self.env.agents]

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        """Reset the wrapped env; the ids trade seats from the previous episode."""
        first, second = self.possible_agents
        swap = self._episodes % 2 == 1
        self._to_id = {first: second, second: first} if swap else {first: first, second: second}
        self._episodes += 1
        self.env.reset(seed=seed, options=options)

    def agent_iter(self, max_iter: int = 2**63) -> Iterator[str]:
        """The agents in turn, by the ids shown."""
        for agent in self.env.agent_iter(max_iter):
            yield self._to_id[agent]

    def last(self, observe: bool = True) -> Tuple[Any, float, bool, bool, dict]:
        """The wrapped env's ``last()``: what the agent whose turn it is sees."""
        return self.env.last(observe)

    def step(self, action: Any) -> None:
        """The wrapped env's ``step``."""
        self.env.step(action)

    def observation_space(self, agent: str) -> Any:
        """The observation space of the seat ``agent`` holds now."""
        return self.env.observation_space(self._wrapped_id(agent))

    def action_space(self, agent: str) -> Any:
        """The action space of the seat ``agent`` holds now."""
        return self.env.action_space(self._wrapped_id(agent))

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    def _wrapped_id(self, agent: str) -> str:
        return next(wrapped for wrapped, shown in self._to_id.items() if shown == agent)
