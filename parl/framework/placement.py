"""Placement: where a Manager's agents run, chosen by ``Manager(..., placement=...)``.

    runner = make_runner("cooperative", context)   # done by Manager.__init__
    comm = runner.communicator(wrapper, agent_id)  # Manager.add_agent binds helpers to these
    runner.start()                                 # Manager.start, after the wrappers
    while runner.running(): ...                    # Manager.running
    runner.join(deadline)                          # Manager.join: the agents finish their games
    still_alive = runner.stop(deadline)            # Manager.stop, after the wrappers were stopped

Every placement runs the same Agent code and plays each agent's games through
the one episode loop the Manager hands it (:attr:`RunnerContext.play`), which
records episodes and errors; only where that loop runs changes:

- ``"threads"``: one OS thread per agent (:class:`ThreadRunner`); helpers talk
  to the wrappers' prediction threads through :class:`~parl.Communicator`.
- ``"cooperative"``: every agent is a greenlet in one scheduler thread, which
  runs the batched predictions itself
  (:class:`~parl.framework.cooperative.CooperativeRunner`).
- ``"processes"``: agents in forked worker processes, ``Manager(..., workers=N)``; predictions
  cross through shared memory (:class:`~parl.framework.worker_pool.ProcessRunner`, built by the
  Manager itself since it needs the worker settings and the Manager's episode records).

A new placement is one more :class:`AgentRunner` subclass and one more branch
in :func:`make_runner`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Set

from parl.framework import affinity
from parl.framework.agent import Agent
from parl.framework.communicator import Communicator
from parl.framework.computation_wrapper import ComputationWrapper

#: The placements :func:`make_runner` knows.
PLACEMENTS = ("threads", "cooperative", "processes")


@dataclass(frozen=True)
class RunnerContext:
    """What a runner gets from its Manager.

    Attributes:
        agents: the Manager's agents (the list grows with ``add_agent`` until ``start``).
        wrappers: task name -> wrapper.
        play: plays one agent's games in the calling thread (or greenlet), recording each
            episode and any error; returns when the agent is done, failed, or the Manager stops.
        stopping: set by ``Manager.stop``.
        agent_cpus: cores for the threads that run agents (None: the OS decides).
    """

    agents: List[Agent]
    wrappers: Mapping[str, ComputationWrapper]
    play: Callable[[Agent], None]
    stopping: threading.Event
    agent_cpus: Optional[Set[int]]


class AgentRunner:
    """Runs a Manager's agents in one placement; see the module docstring for the calls."""

    def __init__(self, context: RunnerContext) -> None:
        self.context = context

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        """The agent-side end of ``wrapper`` for agent ``agent_id`` (called before :meth:`start`)."""
        raise NotImplementedError

    def start(self) -> None:
        """Start playing every agent's games (the wrappers are started)."""
        raise NotImplementedError

    def running(self) -> bool:
        """Whether some agent is still playing."""
        raise NotImplementedError

    def join(self, deadline: Optional[float]) -> None:
        """Wait until every agent is done or ``time.monotonic()`` passes ``deadline`` (None: no limit)."""
        raise NotImplementedError

    def stop(self, deadline: float) -> List[str]:
        """End the agents (``context.stopping`` is set and the wrappers are stopped); returns the
        names of threads still running at ``deadline``."""
        raise NotImplementedError

    def wake(self) -> None:
        """Look again at the wrappers now (called after ``Manager.resume``); optional."""


class ThreadRunner(AgentRunner):
    """One OS thread per agent, named ``parl-agent-<id>``."""

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self._threads: List[threading.Thread] = []

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        return wrapper.communicator(agent_id)

    def start(self) -> None:
        for agent in self.context.agents:
            thread = threading.Thread(target=self._run, args=(agent,), name=f"parl-agent-{agent.id}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run(self, agent: Agent) -> None:
        affinity.configure_agent_thread(self.context.agent_cpus)
        self.context.play(agent)

    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def join(self, deadline: Optional[float]) -> None:
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stop(self, deadline: float) -> List[str]:
        self.join(deadline)
        return [t.name for t in self._threads if t.is_alive()]


def make_runner(placement: str, context: RunnerContext) -> AgentRunner:
    """The runner of ``placement``.

    Raises:
        ValueError: ``placement`` is not one of :data:`PLACEMENTS`.
    """
    if placement == "threads":
        return ThreadRunner(context)
    if placement == "cooperative":
        from parl.framework.cooperative import CooperativeRunner  # imports greenlet only when used

        return CooperativeRunner(context)
    if placement == "processes":
        raise ValueError("placement 'processes' is built by parl.Manager(..., placement='processes', workers=N)")
    raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")


def check_placement(placement: object) -> str:
    """``placement`` if it names a known placement.

    Raises:
        ValueError: naming the value and the choices.
    """
    if not isinstance(placement, str) or placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    return placement
