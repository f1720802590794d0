"""CappedThreadsOptions: the options of placement ``"capped-threads"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from parl.validation import check_int


@dataclass(frozen=True)
class CappedThreadsOptions:
    """Attributes:
    max_agents: the most agents the placement starts (None: no limit).

    Raises:
        ParameterError: ``max_agents`` is not an integer >= 1.
    """

    max_agents: Optional[int] = None

    def __post_init__(self) -> None:
        if self.max_agents is not None:
            check_int("max_agents", self.max_agents, 1)
