"""EnvStepsAgent: an agent that counts the environment steps of the whole run, restored on resume."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from parl.core.agent import Agent
from parl.core.counters import read_counter


class EnvStepsAgent(Agent):
    """An :class:`~parl.Agent` with ``total_steps``: the env steps (time steps) of the whole run, which the
    subclass's episode loop counts and step-based schedules (an exploration epsilon) read; kept in
    :meth:`counters` and restored on resume by :meth:`restore_counters`. ``parl train`` reads it as the
    run's env steps."""

    def __init__(self, env: Any, *, seed: Optional[int] = None, num_games: Optional[int] = None) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        self.total_steps = 0

    def counters(self) -> Dict[str, int]:
        """``episode`` and ``total_steps``."""
        return {**super().counters(), "total_steps": self.total_steps}

    def restore_counters(self, counters: Mapping[str, int]) -> None:
        """Take up ``episode`` and ``total_steps`` of an earlier run (see :meth:`Agent.restore_counters`).

        Raises:
            ValueError: a counter is missing or is not an integer >= 0 (nothing is changed then).
        """
        total_steps = read_counter(counters, "total_steps", type(self).__name__)
        super().restore_counters(counters)
        self.total_steps = total_steps
