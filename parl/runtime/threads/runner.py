"""Placement ``"threads"``: one OS thread per agent, talking to the wrappers' threads through
their in-process communicators.

Every agent thread is started first and waits on one event; the agents then start playing
together. Started one by one while the earlier ones already played, each ``Thread.start`` would
wait for Python's lock among all the running agents (about 20 ms each with a thousand agents on
one core, so the last agent started 20 s after the first)."""

from __future__ import annotations

import threading
import time
from time import perf_counter
from typing import Dict, List, Optional

from parl import affinity
from parl.core.agent import Agent
from parl.core.communicator import Communicator
from parl.runtime.runner import AgentRunner, RunnerContext
from parl.runtime.watchdog import idle_agents
from parl.serving.communicator import InProcessCommunicator
from parl.serving.computation_wrapper import ComputationWrapper


class ThreadRunner(AgentRunner):
    """One OS thread per agent, named ``parl-agent-<id>`` (a daemon thread: one stuck in its
    environment does not keep the process from exiting)."""

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self._threads: List[threading.Thread] = []
        self._go = threading.Event()  # set once every agent thread is started
        self._communicators: Dict[int, List[InProcessCommunicator]] = {}  # agent id -> its communicators
        self._playing: Dict[int, float] = {}  # agent id -> when it began to play

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        comm = wrapper.communicator(agent_id)
        self._communicators.setdefault(agent_id, []).append(comm)
        return comm

    def start(self) -> None:
        for agent in self.context.agents:
            thread = threading.Thread(target=self._run, args=(agent,), name=f"parl-agent-{agent.id}", daemon=True)
            self._threads.append(thread)
            thread.start()
        self._go.set()

    def _run(self, agent: Agent) -> None:
        self._go.wait()
        affinity.configure_agent_thread(self.context.agent_cpus)
        self._playing[agent.id] = perf_counter()
        try:
            self.context.play(agent)
        finally:
            del self._playing[agent.id]

    def agent_threads(self) -> int:
        """One thread per agent."""
        return len(self.context.agents)

    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def join(self, deadline: Optional[float]) -> None:
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stop(self, deadline: float) -> List[str]:
        self.join(deadline)
        return [t.name for t in self._threads if t.is_alive()]

    def idle_agents(self) -> Dict[int, float]:
        return idle_agents(
            self._playing, lambda i: [(c._parked_at, c._resumed_at) for c in self._communicators.get(i, ())]
        )
