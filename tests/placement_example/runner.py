"""CappedThreadRunner: placement ``"threads"`` that starts at most ``max_agents`` agents."""

from __future__ import annotations

from parl.runtime.runner import RunnerContext
from parl.runtime.threads import ThreadRunner
from placement_example.options import CappedThreadsOptions


class CappedThreadRunner(ThreadRunner):
    """One thread per agent, refusing to start more than its options' ``max_agents``."""

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self.options: CappedThreadsOptions = context.options

    def start(self) -> None:
        """Start the agents, as placement "threads" does.

        Raises:
            ValueError: more agents than ``max_agents``, naming both.
        """
        cap, agents = self.options.max_agents, len(self.context.agents)
        if cap is not None and agents > cap:
            raise ValueError(f"placement 'capped-threads' starts at most max_agents={cap} agents, got {agents}")
        super().start()
