"""The spaces each task of a robot config is sized by and checked against.

    spaces = spaces_by_task(lambda: config.env.make(), "env CartPole-v1", "env.id", config.agent, ["RL"])
    spaces["RL"].model_sizes(task.model)

A single-agent environment gives every task its spaces. A multi-agent (PettingZoo) environment gives
each task the spaces of the environment agents the agent's ``policy_mapping`` maps to it; agents of
one task must have the same spaces. docs/multiagent.md describes the mapping.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Sequence

from parl.experiment.config.class_spec import ClassSpec, ConfigError, one_line
from parl.experiment.config.env_spaces import SIZE_KEYS, EnvSpaces, close_env, made_env
from parl.multiagent.envs import action_space_of, env_agent_ids, is_multiagent, observation_space_of
from parl.multiagent.mapping import PolicyMapping
from parl.utils.spaces import describe_space

#: The agent option that maps a multi-agent environment's agents to tasks.
POLICY_MAPPING = "policy_mapping"


def spaces_by_task(
    make_env: Callable[[], Any], name: str, key_path: str, agent: ClassSpec, tasks: Sequence[str]
) -> Dict[str, EnvSpaces]:
    """Task name -> the spaces of its environment agents (all of them in a single-agent environment),
    from one environment, closed at once.

    Raises:
        ConfigError: as :meth:`EnvSpaces.of`; for a multi-agent environment also ``agent.class`` when the agent
            class does not play one, ``agent.policy_mapping`` when it does not map every environment agent to a
            task, and ``agent.policy_mapping`` when one task's agents have different spaces.
    """
    instance = made_env(make_env)
    if not is_multiagent(instance):
        close_env(instance)
        single = EnvSpaces.of(lambda: instance, name, key_path)
        return {task: single for task in tasks}
    try:
        ids = env_agent_ids(instance)
        spaces = {i: (observation_space_of(instance, i), action_space_of(instance, i)) for i in ids}
    except ValueError as exc:
        raise ConfigError(f"{key_path}: {one_line(exc)}") from exc
    finally:
        close_env(instance)
    if not callable(getattr(agent.cls, "helper_tasks", None)) or POLICY_MAPPING not in _keywords(agent.cls):
        raise ConfigError(
            f"agent.class: {agent.import_path} plays single-agent environments and {name} is a multi-agent "
            f"(PettingZoo) one; use parl.multiagent.PettingZooAgent (docs/multiagent.md)"
        )
    try:
        mapping = PolicyMapping(agent.kwargs.get(POLICY_MAPPING, _default(agent.cls, POLICY_MAPPING)))
        task_of = mapping.tasks_of(ids, tasks)
    except ValueError as exc:
        raise ConfigError(f"agent.{one_line(exc)}") from exc
    out = {}
    for task in tasks:
        members: List[str] = [i for i in ids if task_of[i] == task]
        if not members:
            unavailable = dict.fromkeys(SIZE_KEYS, "agent.policy_mapping maps no environment agent to it")
            out[task] = EnvSpaces(f"{name} (no agent on task {task!r})", None, None, {}, unavailable)
            continue
        first = members[0]
        for other in members[1:]:
            if any(describe_space(a) != describe_space(b) for a, b in zip(spaces[first], spaces[other])):
                raise ConfigError(
                    f"agent.{POLICY_MAPPING}: agents {first!r} and {other!r} share task {task!r} but have different "
                    f"spaces ({describe_space(spaces[first][0])} vs {describe_space(spaces[other][0])}, "
                    f"{describe_space(spaces[first][1])} vs {describe_space(spaces[other][1])})"
                )
        out[task] = EnvSpaces.from_spaces(f"{name} agent {first}", *spaces[first])
    return out


def _keywords(cls: Any) -> List[str]:
    try:
        return list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return []


def _default(cls: Any, keyword: str) -> Any:
    parameter = inspect.signature(cls).parameters[keyword]
    return None if parameter.default is parameter.empty else parameter.default
