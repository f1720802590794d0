"""EpisodeLog: what a Manager keeps of its finished episodes, in memory that does not grow with them.

    log = EpisodeLog(window=10_000)
    log.add({"agent_id": 0, "episode": 0, "seconds": 0.1, "reward": 9.0, "steps": 9})
    log.totals()          # EpisodeTotals over every episode added: episodes, steps, reward sum and mean
    log.agent_totals()    # the same per agent id
    log.recent()          # the records of the last ``window`` episodes, oldest first
    log.read_new()        # the records added since the previous read_new, oldest first

Running totals count every episode; the records themselves are kept for the last ``window``
episodes only, so a robot that plays for days keeps a few megabytes of them (a record is a small
dict, some 300-500 bytes). A reader of :meth:`EpisodeLog.read_new` sees every record exactly once
as long as no more than ``window`` episodes end between two of its reads; records that fell out of
the window before it read them are counted in :attr:`EpisodeLog.missed` (and logged).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Mapping

from parl.validation import check_int

logger = logging.getLogger("parl")

#: Episode records a Manager keeps unless told otherwise (``Manager(episode_window=...)``).
DEFAULT_WINDOW = 10_000


@dataclass(frozen=True)
class EpisodeTotals:
    """Running totals over finished episodes.

    Attributes:
        episodes: episodes finished.
        steps: their summed ``steps``.
        reward_sum: their summed ``reward``.
    """

    episodes: int = 0
    steps: int = 0
    reward_sum: float = 0.0

    @property
    def reward_mean(self) -> float:
        """Mean reward per episode (nan before the first episode)."""
        return self.reward_sum / self.episodes if self.episodes else float("nan")

    def plus(self, record: Mapping[str, Any]) -> "EpisodeTotals":
        """These totals with one more episode, whose record has ``steps`` and ``reward``."""
        return EpisodeTotals(
            self.episodes + 1, self.steps + int(record["steps"]), self.reward_sum + float(record["reward"])
        )


class EpisodeLog:
    """Running totals of every finished episode, and the records of the last ``window`` of them.

    Safe to call from any thread.
    """

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        """
        Raises:
            ValueError: ``window`` is not an integer >= 1.
        """
        self.window = check_int("episode_window", window, 1)
        self._lock = threading.Lock()
        self._recent: Deque[Dict[str, Any]] = deque(maxlen=self.window)
        self._totals = EpisodeTotals()
        self._agents: Dict[int, EpisodeTotals] = {}
        self._added = 0  # records ever added
        self._read = 0  # records ever added when read_new last ran
        #: Records that left the window before :meth:`read_new` returned them.
        self.missed = 0

    def add(self, record: Dict[str, Any]) -> None:
        """Count one finished episode's record (``agent_id``, ``steps``, ``reward``, ...) and keep it
        among the recent ones."""
        agent_id = int(record.get("agent_id", -1))
        with self._lock:
            self._recent.append(record)
            self._added += 1
            self._totals = self._totals.plus(record)
            self._agents[agent_id] = self._agents.get(agent_id, EpisodeTotals()).plus(record)

    def recent(self) -> List[Dict[str, Any]]:
        """The records of the last ``window`` episodes (all of them while fewer ended), oldest first."""
        with self._lock:
            return list(self._recent)

    def read_new(self) -> List[Dict[str, Any]]:
        """The records added since the previous call (or since the start), oldest first; those that
        already left the window are counted in :attr:`missed` instead."""
        with self._lock:
            new = self._added - self._read
            kept = min(new, len(self._recent))
            records = list(itertools.islice(self._recent, len(self._recent) - kept, None))
            self._read = self._added
            lost = new - kept
            self.missed += lost
        if lost:
            logger.warning(
                "%d episode records left the window of %d before they were read; read more often "
                "or raise episode_window",
                lost,
                self.window,
            )
        return records

    def totals(self) -> EpisodeTotals:
        """Totals over every episode added."""
        with self._lock:
            return self._totals

    def agent_totals(self) -> Dict[int, EpisodeTotals]:
        """Agent id -> totals over that agent's episodes (agents with none are absent)."""
        with self._lock:
            return dict(self._agents)
