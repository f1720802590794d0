"""AgentRunner: the interface every placement implements, and the episode loop they all run.

    runner = registry.make_runner("cooperative", context)   # done by Manager.__init__, by its options
    comm = runner.communicator(wrapper, agent_id)           # Manager.add_agent binds helpers to these
    runner.start()                                          # Manager.start, after the wrappers
    while runner.running(): ...                             # Manager.running
    runner.join(deadline)                                   # Manager.join: the agents finish their games
    still_alive = runner.stop(deadline)                     # Manager.stop, after the wrappers were stopped
    runner.idle_agents()                                    # the watchdog: agents in their environment
    env = runner.environment(make_env)                      # Manager.environment: an agent's env (or stand-in)
    rows = runner.metrics()                                 # the trainer: the placement's own metrics

Every placement runs the same Agent code and plays each agent's games through
:func:`play_games`, as :attr:`RunnerContext.play` does for agents in this
process; only where that loop runs changes. A placement is an entry of
:mod:`parl.runtime.registry`, and the placement contract
(:class:`parl.testing.PlacementContract`) runs over every entry.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from greenlet import GreenletExit

from parl.core.agent import Agent, check_episode_result
from parl.core.communicator import Communicator
from parl.core.errors import AgentError, EpisodeResultError, StoppedError
from parl.serving.computation_wrapper import ComputationWrapper

logger = logging.getLogger("parl")


@dataclass(frozen=True)
class RunnerContext:
    """What a runner gets from its Manager.

    Attributes:
        agents: the Manager's agents (the list grows with ``add_agent`` until ``start``).
        wrappers: task name -> wrapper.
        play: plays one agent's games in the calling thread (or greenlet), recording each
            episode and any error; returns when the agent is done, failed, or the Manager stops.
        stopping: set by ``Manager.stop``.
        agent_cpus: cores for the threads that run agents (None: the OS decides); the Manager
            gives its runner a context with the cores chosen when it starts (the agents known).
        record_episode: keeps one finished episode's record (for runners whose agents play
            elsewhere and send their records back).
        record_error: keeps one agent's error (the same, for errors).
        options: the placement's options: an instance of its registry entry's options type (made
            and checked when made; the Manager reads none of its fields).
        task_settings: task name -> the :class:`~parl.TaskSettings` the tasks were built from
            (for runners that build copies of the tasks elsewhere).
        shared: the Manager's ``shared`` parts (the same).
        restarts: agent id -> how it may be restarted after a failure (``restart_agents``; none:
            a failure ends it), for runners that call :func:`play_games` themselves.
    """

    agents: List[Agent]
    wrappers: Mapping[str, ComputationWrapper]
    play: Callable[[Agent], None]
    stopping: threading.Event
    agent_cpus: Optional[Set[int]]
    record_episode: Callable[[Dict[str, Any]], None]
    record_error: Callable[[AgentError], None]
    options: Any = None
    task_settings: Mapping[str, Any] = field(default_factory=dict)
    shared: Optional[Mapping[str, Mapping[str, str]]] = None
    restarts: Mapping[int, "Restarts"] = field(default_factory=dict)


class AgentRunner(abc.ABC):
    """Runs a Manager's agents in one placement; see the module docstring for the calls."""

    def __init__(self, context: RunnerContext) -> None:
        self.context = context

    @abc.abstractmethod
    def communicator(self, wrapper: ComputationWrapper, agent_id: int) -> Communicator:
        """The agent-side end of ``wrapper`` for agent ``agent_id`` (called before :meth:`start`)."""
        raise NotImplementedError

    @abc.abstractmethod
    def start(self) -> None:
        """Start playing every agent's games (the wrappers are started)."""
        raise NotImplementedError

    @abc.abstractmethod
    def running(self) -> bool:
        """Whether some agent is still playing."""
        raise NotImplementedError

    @abc.abstractmethod
    def join(self, deadline: Optional[float]) -> None:
        """Wait until every agent is done or ``time.monotonic()`` passes ``deadline`` (None: no limit)."""
        raise NotImplementedError

    @abc.abstractmethod
    def stop(self, deadline: float) -> List[str]:
        """End the agents (``context.stopping`` is set and the wrappers are stopped); returns the
        names of threads (or processes) still running at ``deadline``."""
        raise NotImplementedError

    def pause(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Hold agents that predict elsewhere than the Manager's wrappers (called by
        ``Manager.pause`` after the wrappers are paused; returns once they are held); optional."""

    def resume(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Undo :meth:`pause` (called by ``Manager.resume`` before the wrappers resume); optional."""

    def wake(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Look again at the wrappers now (called after ``Manager.resume`` and on stop); optional."""

    def agent_threads(self) -> int:
        """How many threads of this process play agents (``thread_placement="auto"`` decides by it):
        none by default (greenlets share their scheduler's thread; worker processes are apart)."""
        return 0

    def environment(self, make: Callable[[], Any]) -> Any:
        """The environment of the next agent added (``Manager.environment``): ``make()``, a new local
        copy, by default. A placement whose environments live elsewhere (``"rlx"``: clients over the
        network) returns its stand-in for one, which has the spaces of ``make()``'s."""
        return make()

    def metrics(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """The placement's own metrics since the last call, as rows ``(step, {tag: value})`` (step
        None: the robot's env steps when written); none by default."""
        return []

    def idle_agents(self) -> Dict[int, float]:
        """Agent id -> the ``perf_counter()`` reading since which it has been in its own code (its
        environment), for each agent playing and waiting on no call (see :mod:`parl.runtime.watchdog`);
        also after :meth:`stop`, for the agents that did not stop. Empty by default: a placement
        that does not tell."""
        return {}


def play_games(
    agent: Agent,
    stopped: Callable[[], bool],
    on_episode: Callable[[Dict[str, Any]], None],
    on_error: Callable[[AgentError], None],
    restarts: Optional["Restarts"] = None,
) -> None:
    """Run ``agent``'s episodes until it has played ``num_games`` or ``stopped()``: the loop of every
    placement (an agent thread, a greenlet, a worker process).

    With ``restarts``, an episode's failure (as below) restarts the agent instead of ending it,
    ``restarts.limit`` times at most (:func:`restart_agent`): ``on_error`` gets the error with its
    ``restart`` number, and the agent plays on from its next episode.

    After each episode ``agent.episode`` is counted, then ``on_episode`` gets its record:
    ``agent_id``, ``episode``, ``seconds`` and what ``run_one_episode`` returned. Whatever ends an
    episode otherwise goes to ``on_error`` as an :class:`AgentError` (with ``agent.episode`` still
    that episode) and ends the agent, unless it comes once the robot is stopping: any exception,
    ``SystemExit`` and ``KeyboardInterrupt`` included (raised by the agent's code, as an agent
    never runs in the main thread), and a result that breaks the contract of ``run_one_episode``
    (:func:`~parl.core.agent.check_episode_result`). ``StoppedError`` ends the agent quietly and
    ``GreenletExit`` (a greenlet being ended) goes on up. An agent that has played all its games
    then calls each helper's ``finish`` (updates still in flight are waited for), its errors
    reported the same way.
    """

    def report(exc: BaseException, where: Optional[str]) -> None:
        if isinstance(exc, _PASSED_ON) or (isinstance(exc, KeyboardInterrupt) and _in_main_thread()):
            raise exc
        if not stopped():
            on_error(AgentError(agent.id, agent.episode, exc, where=where))

    def restarted(exc: BaseException, where: Optional[str]) -> bool:
        """Whether the failed episode's agent plays on, restarted (else the failure is reported)."""
        if restarts is None or restarts.used >= restarts.limit or stopped() or isinstance(exc, _PASSED_ON):
            report(exc, where)
            return False
        restarts.used += 1
        on_error(AgentError(agent.id, agent.episode, exc, where=where, restart=restarts.used))
        try:
            restart_agent(agent, restarts.fresh_env)
        except BaseException as renewing:  # noqa: BLE001 - no fresh environment: the agent ends
            report(renewing, "restart (a fresh environment)")
            return False
        return True

    while not stopped() and (agent.num_games is None or agent.episode < agent.num_games):
        start = time.perf_counter()
        try:
            returned = agent.run_one_episode()
        except StoppedError:
            return
        except BaseException as exc:  # noqa: BLE001 - reported, the other agents go on
            if restarted(exc, "run_one_episode"):
                continue
            return
        try:
            result = check_episode_result(returned)
        except EpisodeResultError as exc:
            if restarted(exc, None):
                continue
            return
        record = {"agent_id": agent.id, "episode": agent.episode, "seconds": time.perf_counter() - start}
        record.update(result)
        agent.episode += 1
        on_episode(record)
    if stopped():
        return
    try:
        for helper in agent.helpers.values():
            helper.finish()
    except StoppedError:
        return
    except BaseException as exc:  # noqa: BLE001 - reported as an episode's error is
        report(exc, "helper.finish")


@dataclass
class Restarts:
    """How often one agent may be restarted after a failed episode, and how (``restart_agents``).

    Attributes:
        limit: restarts allowed in the agent's life (0: none, a failure ends it).
        fresh_env: makes the restarted agent's new environment (None: it keeps its own, which its
            next episode resets).
        used: restarts so far.
    """

    limit: int
    fresh_env: Optional[Callable[[], Any]] = None
    used: int = 0


def restart_agent(agent: Agent, fresh_env: Optional[Callable[[], Any]]) -> None:
    """Make a failed ``agent`` ready to play on: its helpers drop the failed episode's unsent steps,
    it gets a new environment from ``fresh_env`` (the old one is closed, as far as it closes), and
    the failed episode counts as played."""
    for helper in agent.helpers.values():
        helper.abandon_episode()
    if fresh_env is not None:
        old, agent.env = agent.env, fresh_env()
        try:
            old.close()
        except Exception:  # noqa: BLE001 - a broken environment may not close; it is dropped anyway
            logger.debug("agent %s: its old environment did not close", agent.id, exc_info=True)
    agent.episode += 1


#: What ends an agent without being its error, besides StoppedError: a greenlet being ended.
_PASSED_ON = (GreenletExit,)


def _in_main_thread() -> bool:
    """Whether this is the main thread, where a KeyboardInterrupt is Ctrl-C (and must stop the run)."""
    return threading.current_thread() is threading.main_thread()
