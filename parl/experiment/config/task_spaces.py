"""The spaces each task of a robot config is sized by and checked against.

    spaces = spaces_by_task(lambda: config.env.make(), "env CartPole-v1", "env.id", config.agent, ["RL"])
    spaces["RL"].model_sizes(task.model)

A single-agent environment gives every task its spaces. A multi-agent (PettingZoo) environment gives
each task the spaces of the environment agents the agent's ``policy_mapping`` maps to it; agents of
one task must have the same spaces. docs/multiagent.md describes the mapping. A multi-agent
environment with a global state (``env.state_space``, as MPE's) also sizes ``state_dim``, the global
state input of a centralized critic (:class:`~parl.models.CentralCriticActorCritic`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from parl.experiment.config.class_spec import ClassSpec, ConfigError, one_line
from parl.experiment.config.env_spaces import SIZE_KEYS, EnvSpaces, close_env, made_env, required_keywords
from parl.multiagent.envs import action_space_of, env_agent_ids, is_multiagent, is_turn_based, observation_space_of
from parl.multiagent.mapping import PolicyMapping
from parl.utils.spaces import describe_space, observation_sizes

#: The agent option that maps a multi-agent environment's agents to tasks.
POLICY_MAPPING = "policy_mapping"

#: The model size a multi-agent environment's global state declares.
STATE_DIM = "state_dim"

#: Every size keyword a model may take from the environment, the global state's included.
TASK_SIZE_KEYS = SIZE_KEYS + (STATE_DIM,)


@dataclass
class TaskSpaces(EnvSpaces):
    """The spaces of one task's environment agents, and the length of the environment's global state.

    Attributes:
        state_dim: the length of ``env.state()`` (None: the environment declares no 1-D ``state_space``).
        senders: the task's helpers in one environment copy that send the segments of one step together (the
            agents of a Parallel environment on this task; 1 in a turn-based one, whose agents act in turn):
            what the batching word ``agents`` counts per environment copy.
    """

    state_dim: Optional[int] = None
    senders: int = 1

    def model_sizes(self, spec: ClassSpec) -> Dict[str, int]:
        """As :meth:`EnvSpaces.model_sizes`, and ``state_dim`` where the class takes it and the config leaves
        it out.

        Raises:
            ConfigError: as :meth:`EnvSpaces.model_sizes`; ``<model>.state_dim`` when the class requires it
                and the environment declares no global state, or when the config states one that does not
                match the environment's.
        """
        out = super().model_sizes(spec)
        stated = spec.kwargs.get(STATE_DIM)
        if stated is not None and self.state_dim is not None and stated != self.state_dim:
            raise ConfigError(
                f"{spec.key_path}.{STATE_DIM}: {stated!r} does not match {self.name}'s global state "
                f"(a state_space of shape [{self.state_dim}])"
            )
        if spec.accepted is None or STATE_DIM not in spec.accepted or STATE_DIM in spec.kwargs:
            return out
        if self.state_dim is not None:
            out[STATE_DIM] = self.state_dim
        elif STATE_DIM in required_keywords(spec.cls):
            raise ConfigError(
                f"{spec.key_path}.{STATE_DIM}: missing, required by {spec.import_path}, and {self.name} "
                f"declares no global state (a state_space of shape [n])"
            )
        return out


def state_dim_of(env: Any) -> Optional[int]:
    """The length of ``env``'s global state: from its ``state_space`` when that is a Box of shape [n]
    (None otherwise)."""
    space = getattr(env, "state_space", None)
    if space is None:
        return None
    try:
        return observation_sizes(space).get("obs_dim")
    except ValueError:
        return None


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
        state_dim = state_dim_of(instance)
        turn_based = is_turn_based(instance)
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
    out: Dict[str, EnvSpaces] = {}
    for task in tasks:
        members: List[str] = [i for i in ids if task_of[i] == task]
        if not members:
            unavailable = dict.fromkeys(SIZE_KEYS, "agent.policy_mapping maps no environment agent to it")
            out[task] = TaskSpaces(f"{name} (no agent on task {task!r})", None, None, {}, unavailable, state_dim)
            continue
        first = members[0]
        for other in members[1:]:
            if any(describe_space(a) != describe_space(b) for a, b in zip(spaces[first], spaces[other])):
                raise ConfigError(
                    f"agent.{POLICY_MAPPING}: agents {first!r} and {other!r} share task {task!r} but have different "
                    f"spaces ({describe_space(spaces[first][0])} vs {describe_space(spaces[other][0])}, "
                    f"{describe_space(spaces[first][1])} vs {describe_space(spaces[other][1])})"
                )
        sized = EnvSpaces.from_spaces(f"{name} agent {first}", *spaces[first])
        out[task] = TaskSpaces(
            sized.name,
            sized.observation_space,
            sized.action_space,
            sized.sizes,
            sized.unavailable,
            state_dim,
            senders=1 if turn_based else len(members),
        )
    return out


def _keywords(cls: Any) -> List[str]:
    try:
        return list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return []


def _default(cls: Any, keyword: str) -> Any:
    parameter = inspect.signature(cls).parameters[keyword]
    return None if parameter.default is parameter.empty else parameter.default
