"""What parl reads of a multi-agent environment: PettingZoo's Parallel API and its AEC (turn-based) API.

    is_multiagent(env)            # True for either: the env has ``possible_agents``
    is_turn_based(env)            # True for an AEC env (``agent_iter`` and ``last``)
    env_agent_ids(env)            # ["agent_0", "agent_1", "agent_2"]
    observation_space_of(env, "agent_0"), action_space_of(env, "agent_0")

Both APIs give each agent its own spaces (``env.observation_space(agent)``); a
Parallel env steps all live agents at once with a dict of actions, an AEC env
one agent at a time (``for agent in env.agent_iter(): env.last(); env.step(a)``).
"""

from __future__ import annotations

from typing import Any, List


def is_multiagent(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo environment (Parallel or AEC): it lists ``possible_agents``."""
    return isinstance(getattr(env, "possible_agents", None), (list, tuple))


def is_turn_based(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo AEC environment: agents act in turn (``agent_iter`` and ``last``)."""
    return callable(getattr(env, "agent_iter", None)) and callable(getattr(env, "last", None))


def env_agent_ids(env: Any) -> List[str]:
    """Every agent id ``env`` may have (its ``possible_agents``), as strings.

    Raises:
        ValueError: ``env`` is not a PettingZoo environment, or lists no agents.
    """
    if not is_multiagent(env):
        raise ValueError(f"expected a PettingZoo environment (with possible_agents), got {type(env).__name__}")
    ids = [str(agent) for agent in env.possible_agents]
    if not ids:
        raise ValueError(f"{type(env).__name__} lists no possible_agents")
    return ids


def observation_space_of(env: Any, agent_id: str) -> Any:
    """The observation space of ``agent_id`` in ``env``."""
    return _space(env, "observation", agent_id)


def action_space_of(env: Any, agent_id: str) -> Any:
    """The action space of ``agent_id`` in ``env``."""
    return _space(env, "action", agent_id)


def _space(env: Any, kind: str, agent_id: str) -> Any:
    by_agent = getattr(env, f"{kind}_space")
    if callable(by_agent):
        return by_agent(agent_id)
    spaces = getattr(env, f"{kind}_spaces", None)  # the older PettingZoo form
    if isinstance(spaces, dict) and agent_id in spaces:
        return spaces[agent_id]
    raise ValueError(f"{type(env).__name__} gives no {kind} space for agent {agent_id!r}")
