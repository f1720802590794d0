"""Which agents are in their own code (their environment) and for how long; a warning for each that
stays there longer than the Manager's ``stall_seconds``.

    manager = parl.Manager(tasks, stall_seconds=60.0)  # the default; None: no warnings
    manager.start()
    manager.stalled()                                  # {agent id: seconds} past stall_seconds
    not_stopped = manager.stop()                       # [StuckAgent(agent_id, seconds), ...]

An agent calls its helpers at every step. Each placement's transport notes, per agent and task,
when its last call began to wait on the robot and when its reply came (``perf_counter`` readings:
the ones the transport takes anyway, or one more). An agent none of whose calls is waiting has
been in its own code since its last reply, or since it began to play: in its environment's step
or reset, or in its own bookkeeping. Agents waiting on a prediction (also while the Manager is
paused) or an update, agents not yet playing and agents done are not in their environment.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from time import perf_counter
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

logger = logging.getLogger("parl")


def idle_since(calls: Iterable[Tuple[float, float]], started: float) -> Optional[float]:
    """The ``perf_counter()`` reading since which an agent has been in its own code, or None while it
    waits on a call.

    Args:
        calls: per transport of the agent (one per task), when its last call began to wait and when
            its reply came (0.0 for neither yet).
        started: when the agent began to play.
    """
    since = started
    for waited, replied in calls:
        if waited > replied:
            return None
        if replied > since:
            since = replied
    return since


def idle_agents(
    playing: Mapping[int, float], calls: Callable[[int], Iterable[Tuple[float, float]]]
) -> Dict[int, float]:
    """Agent id -> :func:`idle_since` of every agent in ``playing`` (agent id -> when it began to play)
    that is in its own code; ``calls(agent_id)`` gives that agent's calls."""
    idle = {}
    for agent_id, started in dict(playing).items():  # a copy: agents start and end meanwhile
        since = idle_since(calls(agent_id), started)
        if since is not None:
            idle[agent_id] = since
    return idle


@dataclass(frozen=True)
class StuckAgent:
    """An agent that did not stop with its Manager: it was in its environment for ``seconds``."""

    agent_id: int
    seconds: float


def describe_stuck(stuck: Sequence[StuckAgent]) -> str:
    """One line: ``agent 2 did not stop (stuck in its environment for 31 s)`` or ``agents 2, 5 did not
    stop (stuck in their environment for 31 s, 12 s)``."""
    if len(stuck) == 1:
        return f"agent {stuck[0].agent_id} did not stop (stuck in its environment for {stuck[0].seconds:.0f} s)"
    ids = ", ".join(str(s.agent_id) for s in stuck)
    seconds = ", ".join(f"{s.seconds:.0f} s" for s in stuck)
    return f"agents {ids} did not stop (stuck in their environment for {seconds})"


class Watchdog:
    """One thread, ``parl-watchdog``, that warns once per stall about each agent in its environment for
    longer than ``stall_seconds``: ``agent 3 has been in its environment for 61 s (no call to its
    helpers since)`` on the ``parl`` logger.

    Args:
        idle: agent id -> :func:`idle_since` of the agents in their own code now.
        stall_seconds: how long in its environment makes an agent stalled.
        stopping: ends the thread when set.
    """

    def __init__(self, idle: Callable[[], Dict[int, float]], stall_seconds: float, stopping: threading.Event) -> None:
        self.idle = idle
        self.stall_seconds = stall_seconds
        self.stopping = stopping
        self._warned: Dict[int, float] = {}  # agent id -> the idle_since of the stall warned about
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start watching; a check every quarter of ``stall_seconds`` (at most every second)."""
        self._thread = threading.Thread(target=self._run, name="parl-watchdog", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the thread to end (``stopping`` set)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        tick = min(1.0, self.stall_seconds / 4)
        while not self.stopping.wait(tick):
            self.check()

    def check(self) -> None:
        """Warn about every agent newly past ``stall_seconds`` in its environment."""
        now = perf_counter()
        for agent_id, since in self.idle().items():
            seconds = now - since
            if seconds >= self.stall_seconds and self._warned.get(agent_id) != since:
                self._warned[agent_id] = since
                logger.warning(
                    "agent %d has been in its environment for %.0f s (no call to its helpers since)",
                    agent_id,
                    seconds,
                )
