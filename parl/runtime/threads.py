"""Placement ``"threads"``: one OS thread per agent, talking to the wrappers' threads through
their in-process communicators.

Every agent thread is started first and waits on one event; the agents then start playing
together. Started one by one while the earlier ones already played, each ``Thread.start`` would
wait for Python's lock among all the running agents (about 20 ms each with a thousand agents on
one core, so the last agent started 20 s after the first)."""

from __future__ import annotations

import threading
import time
from typing import List, Optional

from parl import affinity
from parl.core.agent import Agent
from parl.core.communicator import Communicator
from parl.runtime.runner import AgentRunner, RunnerContext
from parl.serving.computation_wrapper import ComputationWrapper


class ThreadRunner(AgentRunner):
    """One OS thread per agent, named ``parl-agent-<id>``."""

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self._threads: List[threading.Thread] = []
        self._go = threading.Event()  # set once every agent thread is started

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        return wrapper.communicator(agent_id)

    def start(self) -> None:
        for agent in self.context.agents:
            thread = threading.Thread(target=self._run, args=(agent,), name=f"parl-agent-{agent.id}", daemon=True)
            self._threads.append(thread)
            thread.start()
        self._go.set()

    def _run(self, agent: Agent) -> None:
        self._go.wait()
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
