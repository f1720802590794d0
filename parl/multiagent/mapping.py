"""PolicyMapping: which computation task acts and learns for each agent of a multi-agent environment.

    PolicyMapping("RL")                                    # shared: every agent on task RL
    PolicyMapping({"player_1": "A", "player_2": "B"})      # one task per agent
    PolicyMapping({"adversary_*": "red", "agent_*": "blue"})   # by pattern (fnmatch), first match wins

The same two forms are a robot config's ``agent.policy_mapping`` (a task name, or a mapping of
patterns to task names). An agent id no pattern matches is an error that names it.
"""

from __future__ import annotations

import fnmatch
from typing import Dict, Iterable, Mapping, Sequence, Tuple, Union

#: What a policy mapping is made from: one task name (shared), or patterns -> task names.
MappingSource = Union[str, Mapping[str, str], "PolicyMapping"]


class PolicyMapping:
    """Environment agent id -> task name, by shell-style patterns (``*``, ``?``, ``[...]``) tried in order.

    Args:
        mapping: a task name (every agent on it), or an ordered mapping of pattern -> task name; an
            exact agent id is a pattern too.

    Raises:
        ValueError: an empty mapping, or a pattern or task name that is not a non-empty string.
    """

    def __init__(self, mapping: MappingSource) -> None:
        if isinstance(mapping, PolicyMapping):
            rules: Sequence[Tuple[str, str]] = mapping.rules
        elif isinstance(mapping, str):
            rules = [("*", mapping)]
        elif isinstance(mapping, Mapping):
            rules = list(mapping.items())
        else:
            raise ValueError(
                f"policy_mapping: expected a task name or a mapping of agent-id patterns to task names, got {mapping!r}"
            )
        if not rules:
            raise ValueError("policy_mapping: expected at least one pattern, got an empty mapping")
        for pattern, task in rules:
            for what, value in (("pattern", pattern), ("task name", task)):
                if not isinstance(value, str) or not value:
                    raise ValueError(f"policy_mapping: expected a non-empty {what}, got {value!r}")
        #: The (pattern, task name) pairs, in the order they are tried.
        self.rules: Tuple[Tuple[str, str], ...] = tuple(rules)

    def task_of(self, agent_id: str) -> str:
        """The task of environment agent ``agent_id``: that of the first pattern it matches.

        Raises:
            ValueError: no pattern matches ``agent_id``.
        """
        for pattern, task in self.rules:
            if fnmatch.fnmatchcase(str(agent_id), pattern):
                return task
        raise ValueError(
            f"policy_mapping: agent {agent_id!r} matches none of the patterns {[p for p, _ in self.rules]}"
        )

    def tasks_of(self, agent_ids: Iterable[str], tasks: Iterable[str]) -> Dict[str, str]:
        """Agent id -> task name for every id of ``agent_ids``, each checked to be one of ``tasks``.

        Raises:
            ValueError: an id no pattern matches, or one mapped to a task that is not one of ``tasks``.
        """
        known = sorted(tasks)
        out = {}
        for agent_id in agent_ids:
            task = self.task_of(agent_id)
            if task not in known:
                raise ValueError(f"policy_mapping: agent {agent_id!r} is mapped to task {task!r}; tasks are {known}")
            out[str(agent_id)] = task
        return out

    def __repr__(self) -> str:
        return f"PolicyMapping({dict(self.rules)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PolicyMapping) and other.rules == self.rules

    def __hash__(self) -> int:
        return hash(self.rules)
