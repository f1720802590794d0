"""Concurrent episodes: many agents each play one episode as greenlets of the calling thread, their
predictions batched per task.

    results = play_episodes(make_agent, 60, tasks, make_helper, concurrency=32)

Agent ``i`` is ``make_agent(i)``; its helpers (``make_helper(name, communicator)``, one per task)
predict through communicators that park its greenlet (:mod:`parl.runtime.cooperative.batching`,
the cooperative placement's pieces). The calling thread starts up to ``concurrency`` agents, each
running its ``run_one_episode`` unchanged until its first prediction, then serves each task's
parked predictions with one ``task.predict`` per round, resuming the agents with their rows, and
starts the next agent as one ends. Each agent's environment is closed when its episode ends.

An agent's episode that raises (or returns statistics :func:`~parl.core.agent.check_episode_result`
refuses) ends the agents after it in episode order, unwound at their prediction; the agents before
it play on, and the error of the first failing episode in order is raised once every environment
is closed: the error one-by-one play would have raised.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Tuple

import greenlet
from greenlet import getcurrent

from parl.core.agent import Agent, check_episode_result
from parl.core.agent_helper import AgentHelper
from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.core.errors import RemoteError
from parl.runtime.cooperative import batching
from parl.runtime.cooperative.batching import EXTENSION, Parked, PredictionQueue, Row
from parl.serving.computation_task import ComputationTask
from parl.validation import check_int


class EpisodeCommunicator(Parked):
    """An agent's end of one task while :func:`play_episodes` plays it: ``predict`` parks its
    greenlet until the round's batch holds its row; it never learns."""

    def __init__(self, queue: PredictionQueue, ready: List[Tuple[Parked, Row]], agent_id: int = 0) -> None:
        task = queue.task
        self.agent_id = agent_id
        self._take_task(task)
        self.attach(queue, ready)

    def learn(self, batch: Transition) -> Costs:
        """Refused: these episodes only act.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError(f"{self._what}: an episode of play_episodes does not learn")

    def _outside_error(self) -> Exception:
        return RuntimeError(f"{self._what}: this helper predicts only while play_episodes plays its agent")


#: :class:`EpisodeCommunicator` with the C park when the extension was built (used while ``EXTENSION`` is set).
_EpisodeCommunicatorInC = batching.parked_in_c(EpisodeCommunicator, EXTENSION, "_EpisodeCommunicatorInC")


def play_episodes(
    make_agent: Callable[[int], Agent],
    episodes: int,
    tasks: Mapping[str, ComputationTask],
    make_helper: Callable[[str, Communicator], AgentHelper],
    *,
    deterministic: bool = True,
    concurrency: int = 32,
) -> List[Mapping[str, Any]]:
    """The checked statistics of one episode of each of ``make_agent(0)``, ..., ``make_agent(episodes - 1)``,
    in that order, played at most ``concurrency`` at a time (see the module docstring).

    Each agent's ``helpers`` are set to ``{key: make_helper(name, communicator)}`` over its
    :meth:`~parl.Agent.helper_tasks` of ``tasks`` (by default one per task, keyed by its name);
    the predictions are ``task.predict(..., deterministic=deterministic)`` on batches of every
    parked request of a task (at most ``concurrency`` rows). A sample that breaks the task's specs
    raises its ValueError at that agent's ``predict``; an error of ``task.predict`` reaches the agents
    of its batch as :class:`~parl.RemoteError`.

    Raises:
        ValueError: ``episodes`` or ``concurrency`` is not an integer >= 1.
        Exception: what the first failing episode (in episode order) raised, e.g.
            :class:`~parl.core.errors.EpisodeResultError`.
    """
    check_int("episodes", episodes, 1)
    check_int("concurrency", concurrency, 1)
    return _Episodes(tasks, make_helper, deterministic, concurrency).play(make_agent, episodes)


class _Episodes:
    """One :func:`play_episodes` call: the scheduler state, in the calling (hub) greenlet."""

    def __init__(
        self,
        tasks: Mapping[str, ComputationTask],
        make_helper: Callable[[str, Communicator], AgentHelper],
        deterministic: bool,
        concurrency: int,
    ) -> None:
        self.make_helper = make_helper
        self.concurrency = concurrency
        self.ready: List[Tuple[Parked, Row]] = []
        self.queues = {name: self._queue(task, deterministic) for name, task in tasks.items()}
        self.communicator_class = EpisodeCommunicator if EXTENSION is None else _EpisodeCommunicatorInC
        self.path = batching.hot_path(EXTENSION)
        self.hub = getcurrent()
        self.live: Dict[int, greenlet.greenlet] = {}  # episode -> its greenlet, while it plays
        self.results: Dict[int, Mapping[str, Any]] = {}
        self.failures: Dict[int, BaseException] = {}

    def _queue(self, task: ComputationTask, deterministic: bool) -> PredictionQueue:
        def predict_batch(n, inputs, states):
            return task.predict(inputs, states, deterministic=deterministic)

        return PredictionQueue(
            task,
            max_batchsize=self.concurrency,
            predict_batch=predict_batch,
            prediction_error=lambda exc: RemoteError(f"prediction in task {task.name!r}", exc),
        )

    def play(self, make_agent: Callable[[int], Agent], episodes: int) -> List[Mapping[str, Any]]:
        started = 0
        try:
            while True:
                while len(self.live) < self.concurrency and started < self._end(episodes):
                    self._start(started, make_agent(started))
                    started += 1
                self._end_after(self._end(episodes) - 1)
                if not self.live:
                    break
                waiting = [queue for queue in self.queues.values() if queue.pending]
                if not waiting:
                    raise RuntimeError(f"episodes {sorted(self.live)} neither predict nor end")
                for queue in waiting:
                    batching.serve(queue, self.ready, self.path)
        finally:
            self._end_after(-1)
        if self.failures:
            raise self.failures[min(self.failures)]
        return [self.results[i] for i in range(episodes)]

    def _end(self, episodes: int) -> int:
        """The episodes to play: all of them, or those up to the first that failed."""
        return min(self.failures) + 1 if self.failures else episodes

    def _start(self, index: int, agent: Agent) -> None:
        """Bind the agent's helpers and run it until its first prediction (or its end)."""
        agent_greenlet = greenlet.greenlet(self._run, self.hub)
        helpers = {}
        for key, name in agent.helper_tasks(list(self.queues)).items():
            comm = self.communicator_class(self.queues[name], self.ready, index)
            comm._hub, comm._greenlet = self.hub, agent_greenlet
            helpers[key] = self.make_helper(name, comm)
            helpers[key].task_name = name
        agent.helpers = helpers
        self.live[index] = agent_greenlet
        agent_greenlet.switch(index, agent)

    def _run(self, index: int, agent: Agent) -> None:
        """Agent ``index``'s greenlet: one episode, its statistics or its error kept; its env closed."""
        try:
            self.results[index] = check_episode_result(agent.run_one_episode())
        except greenlet.GreenletExit:
            pass  # ended by the scheduler
        except BaseException as exc:  # noqa: BLE001 - raised by play, in episode order
            self.failures[index] = exc
        finally:
            del self.live[index]
            close = getattr(agent.env, "close", None)
            if close is not None:
                close()

    def _end_after(self, index: int) -> None:
        """Unwind the live agents of episodes after ``index`` (each closes its env)."""
        for queue in self.queues.values():
            queue.pending[:] = [c for c in queue.pending if c.agent_id <= index]
        for episode in sorted(self.live, reverse=True):
            if episode > index and not batching.unwind(self.live[episode], greenlet.GreenletExit):
                raise RuntimeError(f"episode {episode} goes on predicting after it was ended")
