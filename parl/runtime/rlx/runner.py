"""Placement ``"rlx"``: environments anywhere connect over the network, one agent per connection.

    manager = parl.Manager(tasks, placement=ServerSettings(bind="127.0.0.1:7070"))
    for i in range(8):                                    # 8 slots: 8 clients at most
        env = manager.environment(lambda: gymnasium.make("CartPole-v1"))   # a RemoteEnv (its spaces)
        manager.add_agent(GymAgent(env, seed=i), {"RL": parl.OnPolicyHelper()})
    manager.start()                                       # listening; manager.runner.address

The cooperative scheduler (:mod:`parl.runtime.cooperative.runner`) with the RLX server
(:mod:`parl.runtime.rlx.server`) in its thread: between prediction batches it polls the sockets,
and when it has nothing to do it waits on them (a training reply, resume or stop wakes it). An
agent whose environment is a :class:`~parl.runtime.rlx.remote_env.RemoteEnv` plays a slot: each
connection takes a free slot, and its requests reach the agent as the results of ``env.reset``
and ``env.step``, so the requests of every connected client are batched into one prediction as
the cooperative placement batches its agents'. Agents with environments of their own run as in
placement ``"cooperative"``. The slots are the agents made with :meth:`RlxRunner.environment`, so
``max_clients`` is the number of such agents. A task's updates wait for ``min_batchsize`` less the
agents that cannot send now (:meth:`RlxRunner.absent`: the slots no client plays), never for the
batches of slots no client plays. A slot whose agent ends
(its games played, an error, the robot stopping) is logged with the reason; its client moves to a
free slot when the agent played its games between two of the client's episodes, else is ended
with ``error shutdown`` saying why.

Options: a :class:`~parl.runtime.rlx.settings.ServerSettings` (default: listen on
127.0.0.1:7070, no token, 1 MiB frames). The server listens from ``Manager.start`` until the
robot stops, when every client gets ``error shutdown``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

import greenlet

from parl.core.agent import Agent
from parl.core.communicator import Communicator
from parl.rlx.errors import SHUTDOWN
from parl.runtime.cooperative.runner import CooperativeRunner
from parl.runtime.rlx.connection import Connection
from parl.runtime.rlx.remote_env import RemoteEnv
from parl.runtime.rlx.server import RlxServer
from parl.runtime.rlx.settings import ServerSettings
from parl.runtime.rlx.stats import ServerStats
from parl.runtime.runner import RunnerContext
from parl.serving.computation_wrapper import ComputationWrapper
from parl.serving.request_queue import POLL_INTERVAL

logger = logging.getLogger("parl.rlx")


class RlxRunner(CooperativeRunner):
    """The cooperative scheduler serving RLX connections (see the module docstring).

    Attributes:
        settings: the server's settings.
        slots: the slots, in the order their agents were made.
        address: ``(host, port)`` listened on, once started (None before).
    """

    def __init__(self, context: RunnerContext) -> None:
        super().__init__(context)
        self.settings: ServerSettings = context.options
        self.slots: List[RemoteEnv] = []
        self._senders: Dict[int, List[int]] = {}  # id(wrapper) -> the ids of the agents that use it
        self._handed_over: List[Connection] = []  # connections moved to another slot, not yet polled
        self._spaces: Optional[Tuple[Any, Any]] = None
        self._server = RlxServer(self.settings, self.slots, self._weights_version, self._env_steps)

    @property
    def address(self) -> Optional[Tuple[str, int]]:
        """``(host, port)`` the server listens on (None before start)."""
        return self._server.address

    @property
    def stats(self) -> ServerStats:
        """The server's counters (connections open now, accepted, refused, ended...), as they stand."""
        return self._server.stats

    def environment(self, make: Callable[[], Any]) -> RemoteEnv:
        """A new slot, with the spaces of an environment ``make()`` gives (made once, closed at once).

        Raises:
            ValueError: ``make()`` gives a multi-agent (PettingZoo) environment: a slot is one client's
                single-agent environment.
        """
        if self._spaces is None:
            env = make()
            try:
                if isinstance(getattr(env, "possible_agents", None), (list, tuple)):
                    raise ValueError(
                        f"placement 'rlx' serves single-agent environments (one per client), got the multi-agent "
                        f"environment {type(env).__name__}; play it in placement 'threads', 'cooperative', "
                        "'processes' or 'ray'"
                    )
                self._spaces = (env.observation_space, env.action_space)
            finally:
                close = getattr(env, "close", None)
                if close is not None:
                    close()
        slot = RemoteEnv(len(self.slots), *self._spaces, self._server)
        self.slots.append(slot)
        return slot

    def start(self) -> None:
        """Listen (raises OSError when the address cannot be listened on), then start the scheduler."""
        self._server.open()
        super().start()

    def metrics(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """``rlx/*`` and the clients' ``client/*`` metrics since the last call (docs/metrics.md)."""
        return self._server.stats.rows()

    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        """The agent's end of ``wrapper``; the wrapper's updates wait for the batches of the agents that
        can send now, not for those of slots no client plays (:meth:`absent`)."""
        users = self._senders.get(id(wrapper))
        if users is None:
            users = self._senders[id(wrapper)] = []
            wrapper.limit_batch_wait(lambda: self.absent(users))
        users.append(agent_id)
        return super().communicator(wrapper, agent_id)

    def absent(self, agent_ids: List[int]) -> int:
        """How many of the agents ``agent_ids`` cannot send training batches now: the slots' agents
        whose slot no client plays (agents with environments of their own always can; any thread)."""
        agents = self.context.agents
        count = 0
        for agent_id in agent_ids:
            env = agents[agent_id].env if agent_id < len(agents) else None
            count += isinstance(env, RemoteEnv) and env.connection is None
        return count

    # -- the scheduler's hooks -----------------------------------------------------------------
    def _bind_agent(self, agent: Agent, agent_greenlet: greenlet.greenlet, hub: greenlet.greenlet) -> None:
        super()._bind_agent(agent, agent_greenlet, hub)
        if isinstance(agent.env, RemoteEnv):
            agent.env.bind(agent_greenlet, hub)

    def _play(self, agent: Agent) -> None:
        try:
            super()._play(agent)
        finally:
            if isinstance(agent.env, RemoteEnv):  # done, failed or stopped: its slot takes no more clients
                self._slot_ended(agent.env, agent)

    def _slot_ended(self, slot: RemoteEnv, agent: Agent) -> None:
        """``slot``'s agent has ended: the slot takes no new client, the end is logged with its reason,
        and a client playing it moves to a free slot when the agent played its games between two of
        the client's episodes, or else is ended with ``error shutdown`` saying why (when the robot
        stops, the server's close tells every client)."""
        slot.retire()
        stopping = self.context.stopping.is_set()
        games = agent.num_games
        played_out = not stopping and games is not None and agent.episode >= games
        if stopping:
            reason = "the robot is stopping"
        elif played_out:
            reason = f"its agent has played its games ({games})"
        else:
            reason = "its agent failed (the robot's log holds its error)"
        level = logging.DEBUG if stopping else logging.INFO if played_out else logging.WARNING
        logger.log(level, "rlx: slot %d ended: %s", slot.index, reason)
        conn = slot.connection
        if conn is None or stopping:
            return
        target = self._server.free_slot() if played_out and conn.between_episodes else None
        if target is None:
            free = "; no other slot is free" if played_out else ""
            self._server.end(conn, SHUTDOWN, f"slot {slot.index} ended: {reason}{free}")
            return
        logger.info("rlx: %s goes on in slot %d", repr(conn), target.index)  # the repr before the move
        self._handed_over.append(slot.hand_over(target))

    def _poll(self) -> bool:
        served = self._server.poll(0.0)
        while self._handed_over:  # a request a moved connection sent before its move, for its new slot
            conn = self._handed_over.pop()
            if conn.open and conn.pending is not None:
                message, conn.pending = conn.pending, None
                assert conn.slot is not None  # a moved connection has its new slot
                conn.slot.offer(conn, message)
                served = True
        return served

    def _wait_for_work(self) -> None:
        self._server.poll(POLL_INTERVAL)

    def _wake_scheduler(self) -> None:
        self._server.wake()

    def _end(self, agent_greenlets) -> None:
        live = sum(not slot.retired for slot in self.slots)
        if live:  # each slot's own line is a debug one: the robot's stop ends them all
            logger.info("rlx: %d slots end: the robot is stopping", live)
        try:
            super()._end(agent_greenlets)
        finally:
            self._server.close()

    def _calls(self, agent_id: int) -> List[Tuple[float, float]]:
        """Also a slot agent's waits on its client: waiting for the network is not time in its environment."""
        calls = super()._calls(agent_id)
        agent = self.context.agents[agent_id] if agent_id < len(self.context.agents) else None
        if agent is not None and isinstance(agent.env, RemoteEnv):
            calls.append((agent.env.waited_at, agent.env.resumed_at))
        return calls

    def _weights_version(self) -> int:
        return sum(wrapper.task.update_steps for wrapper in self.context.wrappers.values())

    def _env_steps(self) -> int:
        return sum(int(getattr(agent, "total_steps", 0)) for agent in self.context.agents)
