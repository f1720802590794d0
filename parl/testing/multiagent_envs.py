"""Two tiny deterministic multi-agent environments (PettingZoo APIs) whose every observation, reward
and end can be checked, for tests of multi-agent robots.

    env = ComingAndGoingEnv(code=3)        # Parallel API: agents leave early and one enters mid-episode
    env = TurnTakingEnv(code=3, players=3)  # AEC API: players act in turn, rewards from every turn

Both follow the echo convention (:mod:`parl.testing.echo`): an observation is float32
``[echo_value, 0]`` with ``echo_value = 1000 * code + 100 * k + t`` for the k-th of the
environment's ``possible_agents`` at time ``t``, so the echo task answers each agent with its own
value, any batch row tells its sender (``value // 1000``), its agent (``value % 1000 // 100``) and its
time (``value % 100``). Both count the actions that were not the echo of the acting agent's
observation (``mismatches``) and raise ValueError on an action for an agent that may not act now.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium
import numpy as np
from pettingzoo import AECEnv

#: Every agent's action space: any echo value (see the module docstring) is one action.
ACTION_SPACE_SIZE = 1_000_000


def echo_value(code: int, index: int, time: int) -> int:
    """The first observation component of agent ``index`` (of ``possible_agents``) of env ``code`` at ``time``."""
    return 1000 * code + 100 * index + time


def echo_observation(code: int, index: int, time: int) -> np.ndarray:
    """The observation of agent ``index`` of env ``code`` at ``time``: float32 ``[echo_value, 0]``."""
    return np.array([echo_value(code, index, time), 0.0], np.float32)


def _observation_space() -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)


class _EchoAgents:
    """What both environments share: agent ids, spaces, and the check of each action."""

    metadata: Dict[str, Any] = {"name": "parl_echo_agents", "render_modes": []}

    def __init__(self, code: int, possible_agents: Sequence[str]) -> None:
        self.code = code
        self.possible_agents: List[str] = list(possible_agents)
        self.agents: List[str] = []
        self.time = 0
        #: Actions that were not the echo of the acting agent's observation, since the environment was made.
        self.mismatches = 0
        self._observation_space = _observation_space()
        self._action_space = gymnasium.spaces.Discrete(ACTION_SPACE_SIZE)

    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        """Every agent's: float32 ``[2]``."""
        return self._observation_space

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        """Every agent's: ``Discrete(ACTION_SPACE_SIZE)``."""
        return self._action_space

    def index(self, agent: str) -> int:
        """The position of ``agent`` among ``possible_agents``."""
        return self.possible_agents.index(agent)

    def observe(self, agent: str) -> np.ndarray:
        """``agent``'s observation now."""
        return echo_observation(self.code, self.index(agent), self.time)

    def state(self) -> np.ndarray:
        """The global state: float32 ``[1000 * code + time, number of agents now]``."""
        return np.array([1000 * self.code + self.time, len(self.agents)], np.float32)

    def _check_action(self, agent: str, action: Any) -> None:
        if int(action) != echo_value(self.code, self.index(agent), self.time):
            self.mismatches += 1

    def close(self) -> None:
        """Nothing to release."""


class ComingAndGoingEnv(_EchoAgents):
    """A PettingZoo Parallel environment whose agents come and go at set times.

    Agents (``possible_agents``): ``blue_stay`` plays the whole episode of ``length`` steps and is
    truncated at its end; ``blue_end`` is terminated at time ``end_at``; ``red_cut`` is truncated at
    time ``cut_at``; ``red_late`` enters at time ``enter_at`` (its first observation comes with that
    step's results) and is truncated at the end. Each step's reward of an agent is the echo value of the
    observation it acted on, so a transition's reward names its agent and time. Over once no agent is left.

    Args:
        code: the environment's code in every observation (its sender code).
        length, end_at, cut_at, enter_at: the times above; ``0 < end_at, cut_at, enter_at < length <= 99``.

    Raises:
        ValueError: times out of that order.
    """

    def __init__(self, code: int = 0, *, length: int = 6, end_at: int = 2, cut_at: int = 4, enter_at: int = 3) -> None:
        if not (0 < min(end_at, cut_at, enter_at) and max(end_at, cut_at, enter_at) < length <= 99):
            raise ValueError(
                f"ComingAndGoingEnv: expected 0 < end_at, cut_at, enter_at < length <= 99, got "
                f"end_at={end_at}, cut_at={cut_at}, enter_at={enter_at}, length={length}"
            )
        super().__init__(code, ["blue_stay", "blue_end", "red_cut", "red_late"])
        self.length, self.end_at, self.cut_at, self.enter_at = length, end_at, cut_at, enter_at

    def reset(
        self, seed: Optional[int] = None, options: Optional[dict] = None
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, dict]]:
        """Start an episode: ``blue_stay``, ``blue_end`` and ``red_cut`` at time 0."""
        self.time = 0
        self.agents = ["blue_stay", "blue_end", "red_cut"]
        return {agent: self.observe(agent) for agent in self.agents}, {agent: {} for agent in self.agents}

    def step(self, actions: Dict[str, Any]) -> Tuple[Dict[str, Any], ...]:
        """One step of every agent now; returns observations, rewards, terminations, truncations and
        infos, each by agent (observations also of an agent entering now).

        Raises:
            ValueError: ``actions`` are not exactly one per agent now.
        """
        if sorted(actions) != sorted(self.agents):
            raise ValueError(f"ComingAndGoingEnv: expected actions of {sorted(self.agents)}, got {sorted(actions)}")
        acting = list(self.agents)
        rewards = {}
        for agent in acting:
            self._check_action(agent, actions[agent])
            rewards[agent] = float(echo_value(self.code, self.index(agent), self.time))
        self.time += 1
        at_end = self.time >= self.length
        terminations = {agent: agent == "blue_end" and self.time == self.end_at for agent in acting}
        truncations = {agent: at_end or (agent == "red_cut" and self.time == self.cut_at) for agent in acting}
        self.agents = [agent for agent in acting if not (terminations[agent] or truncations[agent])]
        if self.time == self.enter_at and not at_end:
            self.agents.append("red_late")
        entering = [agent for agent in self.agents if agent not in rewards]
        observations = {agent: self.observe(agent) for agent in acting + entering}  # the leaving ones' last too
        infos: Dict[str, dict] = {agent: {} for agent in observations}
        return observations, rewards, terminations, truncations, infos


class TurnTakingEnv(_EchoAgents, AECEnv):
    """A PettingZoo AEC environment: ``players`` players (``player_0``, ...) act in turn, round after
    round, for ``rounds`` rounds; then the game ends (every player terminated, or truncated with
    ``truncate``) and each player sees it at one last turn.

    ``time`` counts the turns played. At turn ``n`` the player acting gets the echo value of its
    observation as reward and every other player 1, so a player's transition, from one of its turns
    to its next, earns ``echo_value + players - 1``; and at its last turn, what it got since.

    Args:
        code: the environment's code in every observation (its sender code).
        players: 2 or more, at most 9.
        rounds: turns of each player, 1 to 99 // players.
        truncate: the game ends by truncation rather than termination.

    Raises:
        ValueError: ``players`` or ``rounds`` out of range.
    """

    def __init__(self, code: int = 0, *, players: int = 3, rounds: int = 3, truncate: bool = False) -> None:
        if not (2 <= players <= 9 and 1 <= rounds and players * rounds <= 99):
            raise ValueError(
                f"TurnTakingEnv: expected 2 <= players <= 9, rounds >= 1 and players * rounds <= 99, "
                f"got players={players}, rounds={rounds}"
            )
        AECEnv.__init__(self)
        _EchoAgents.__init__(self, code, [f"player_{i}" for i in range(players)])
        self.rounds, self.truncate = rounds, truncate
        self.rewards: Dict[str, float] = {}
        self._cumulative_rewards: Dict[str, float] = {}
        self.terminations: Dict[str, bool] = {}
        self.truncations: Dict[str, bool] = {}
        self.infos: Dict[str, dict] = {}
        self.agent_selection = self.possible_agents[0]

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        """Start a game: ``player_0`` acts first."""
        self.time = 0
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: Any) -> None:
        """The turn of ``agent_selection``: ``action`` (None at a player's last turn, after the end).

        Raises:
            ValueError: an action at a player's last turn, or None at a turn of play.
        """
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise ValueError(f"TurnTakingEnv: {agent} takes no action after the end, got {action!r}")
            self._was_dead_step(action)
            return
        if action is None:
            raise ValueError(f"TurnTakingEnv: {agent} must act at turn {self.time}, got None")
        self._check_action(agent, action)
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {other: 1.0 for other in self.agents}
        self.rewards[agent] = float(echo_value(self.code, self.index(agent), self.time))
        self.time += 1
        if self.time >= self.rounds * len(self.possible_agents):
            ended = self.truncations if self.truncate else self.terminations
            ended.update({other: True for other in self.agents})
        self.agent_selection = self.agents[(self.agents.index(agent) + 1) % len(self.agents)]
        self._accumulate_rewards()
