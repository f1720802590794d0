"""Manager: builds tasks and wrappers, runs agents, gathers episode statistics.

    manager = parl.Manager({"RL": parl.TaskSettings(algorithm_func, max_batchsize=64)})
    for i in range(8):
        manager.add_agent(MyAgent(make_env(), num_games=100, seed=i), {"RL": parl.ExpReplayHelper()})
    manager.start()
    episodes = manager.join()          # every agent's per-episode statistics
    print(manager.errors)              # agents that failed: which, in which episode, why

Where the agents run is one setting, ``placement`` (:mod:`parl.runtime.runner`):
``"threads"`` (default) gives each agent its own thread; ``"cooperative"`` runs
every agent as a greenlet in one scheduler thread that batches their
predictions itself (:mod:`parl.runtime.cooperative.runner`; faster with many
agents); ``"processes"`` with ``workers=N`` forks N worker processes that run
the agents, their predictions crossing to this process's wrappers through
shared memory (:mod:`parl.runtime.processes.worker_pool`; for environments whose steps
cost CPU). The agents' code is the same in all three. An agent whose episode
raises (``SystemExit`` and ``KeyboardInterrupt`` included) or returns something
other than its statistics is reported in :attr:`errors` (agent, episode,
traceback) and ends; the others go on.
:meth:`stop` ends everything within its timeout, even with agents blocked on
predictions.

Tasks can share parts of their models (an RL task and an auxiliary task on one
trunk). Every task is built on its own; ``shared`` then puts the first task's
object in place of the others':

    manager = parl.Manager(
        {"RL": rl_settings, "Aux": aux_settings},
        shared={"trunk": {"RL": "model.actor_hidden", "Aux": "model.trunk"},
                "inputs": {"RL": "normalizer", "Aux": "normalizer"}},
    )

Tasks linked this way share one weights lock and one learn lock, so no task
predicts while another writes the shared parameters and their training
passes never overlap. Only the Manager's tasks are linked: an evaluator built
by ``settings.make_task`` owns fresh parameters.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

from parl import affinity
from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper
from parl.core.algorithm import Algorithm
from parl.core.errors import AgentError
from parl.runtime import registry
from parl.runtime.runner import RunnerContext, play_games
from parl.serving.computation_task import ComputationTask
from parl.serving.computation_wrapper import ComputationWrapper
from parl.serving.shared_parts import SharedParts, share_parts
from parl.validation import check_positive

logger = logging.getLogger("parl")


@dataclass
class TaskSettings:
    """How to build one ComputationTask and its wrapper.

    Attributes:
        algorithm_func: zero-argument callable returning the Algorithm
            (see :func:`parl.create_algorithm_func`).
        max_batchsize: most requests packed into one prediction batch (and, by default, training batch).
        min_batchsize: agents' training batches to wait for before an update.
        max_training_batchsize: most agents' training batches taken at once (None: max_batchsize). The
            time-ordered segments among them (on-policy helpers') are joined into one update, so this
            bounds how many env steps an on-policy update covers; replay samples are never joined (each
            is one update), so a replay helper's ``updates_per_step`` holds in every placement.
        training_timeout: seconds to wait for ``min_batchsize`` after the first training batch arrives.
        normalize_inputs: float inputs normalized by running statistics shared by all agents
            (True: all of them); see :class:`~parl.serving.computation_task.ComputationTask`.
        input_clip: bound on normalized inputs.
        reward_scale: rewards are multiplied by this before learning.
        reward_clip: then clipped to [-reward_clip, reward_clip] (None: no clipping).
    """

    algorithm_func: Callable[[], Algorithm]
    max_batchsize: int = 256
    min_batchsize: int = 1
    max_training_batchsize: Optional[int] = None
    training_timeout: float = 0.02
    normalize_inputs: Union[bool, Sequence[str]] = False
    input_clip: float = 10.0
    reward_scale: float = 1.0
    reward_clip: Optional[float] = None

    def make_task(self, name: str) -> ComputationTask:
        """A ComputationTask built from these settings (the Manager's, or a separate evaluator)."""
        return ComputationTask(
            name,
            self.algorithm_func(),
            normalize_inputs=self.normalize_inputs,
            input_clip=self.input_clip,
            reward_scale=self.reward_scale,
            reward_clip=self.reward_clip,
        )


class Manager:
    """Owns a robot's tasks, wrappers and agents, and runs the agents where ``placement`` says."""

    def __init__(
        self,
        tasks: Mapping[str, TaskSettings],
        *,
        placement: str = "threads",
        workers: Optional[int] = None,
        restart_workers: bool = False,
        heartbeat_timeout: Optional[float] = None,
        shared: Optional[SharedParts] = None,
        thread_placement: str = "one_core",
    ) -> None:
        """Build every task and its wrapper.

        Args:
            tasks: task name -> settings.
            placement: where the agents run: "threads" (default, one thread per agent),
                "cooperative" (greenlets in one scheduler thread) or "processes" (forked worker
                processes; :mod:`parl.runtime.processes.worker_pool`); see :mod:`parl.runtime.runner`.
            workers: worker processes for placement "processes" (None: one per core).
            restart_workers: placement "processes": fork a worker that died (SIGKILL, a crash)
                again with its unfinished agents, instead of reporting them in :attr:`errors`.
            heartbeat_timeout: placement "processes": seconds a worker may send nothing before it is
                ended as one that stopped answering (None: 20 s; see
                :mod:`parl.runtime.processes.worker_pool`).
            shared: group name -> {task name: path}, at least two tasks per group. A path is
                ``"<model attribute of the algorithm>.<attribute path in that model>"`` (e.g.
                ``"model.trunk"``, ``"model.actor_hidden"``, ``"model.layers.0"``) naming a
                LayerFunc, a nested Model or a list or dict of them, or ``"normalizer"``: the
                task's input normalizer (both tasks must normalize the same inputs). The first
                task's object replaces the others', which must have the same layer structure.
                Tasks linked by any group share their locks (see
                :meth:`ComputationTask.share_locks_with`).
            thread_placement: "one_core" (default), "split" (training loops on the
                other cores) or "os" (no pinning); see :mod:`parl.affinity`.

        Raises:
            ValueError: an unknown ``placement``, a bad task setting, or a ``shared`` group that
                names an unknown task, a path that does not exist, or parts of different structure
                (the message names ``shared.<group>.<task>``).
        """
        if not tasks:
            raise ValueError("Manager needs at least one task, got none")
        self.placement = registry.entry(placement).name
        options = {
            "workers": workers,
            "restart_workers": restart_workers or None,
            "heartbeat_timeout": heartbeat_timeout,
        }
        registry.check_options(placement, options)
        self._agent_cpus, self._training_cpus = affinity.plan(thread_placement)
        self.tasks: Dict[str, ComputationTask] = {}
        self.wrappers: Dict[str, ComputationWrapper] = {}
        for name, settings in tasks.items():
            if not isinstance(settings, TaskSettings):
                raise ValueError(f"task {name!r}: expected TaskSettings, got {type(settings).__name__}")
            self.tasks[name] = settings.make_task(name)
        #: Names of the tasks that share parts (and so locks), one list per linked set.
        self.linked_tasks: List[List[str]] = share_parts(self.tasks, shared or {})
        for name, settings in tasks.items():
            task = self.tasks[name]
            self.wrappers[name] = ComputationWrapper(
                task,
                max_batchsize=settings.max_batchsize,
                min_batchsize=settings.min_batchsize,
                max_training_batchsize=settings.max_training_batchsize,
                training_timeout=settings.training_timeout,
            )
        self.agents: List[Agent] = []
        self.errors: List[AgentError] = []
        self._episodes: List[Dict[str, float]] = []
        self._read = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False
        context = RunnerContext(
            agents=self.agents,
            wrappers=self.wrappers,
            play=self._run_agent,
            stopping=self._stop,
            agent_cpus=self._agent_cpus,
            record_episode=self._record_episode,
            record_error=self._record_error,
            options={k: v for k, v in options.items() if v is not None},
        )
        self._runner = registry.make_runner(placement, context)

    def add_agent(self, agent: Agent, helpers: Mapping[str, AgentHelper]) -> int:
        """Bind one helper per task to ``agent``; returns the agent's id.

        Raises:
            ValueError: a helper names an unknown task, or is not an AgentHelper.
        """
        if self._started:
            raise RuntimeError("add agents before Manager.start()")
        if not isinstance(agent, Agent):
            raise ValueError(f"expected a parl.Agent, got {type(agent).__name__}")
        unknown = sorted(set(helpers) - set(self.tasks))
        if unknown:
            raise ValueError(f"helpers for unknown tasks {unknown}; tasks are {sorted(self.tasks)}")
        agent.id = len(self.agents)
        for name, helper in helpers.items():
            if not isinstance(helper, AgentHelper):
                raise ValueError(f"helper for task {name!r}: expected an AgentHelper, got {type(helper).__name__}")
            helper.bind(self._runner.communicator(self.wrappers[name], agent.id))
        agent.helpers = dict(helpers)
        self.agents.append(agent)
        return agent.id

    def start(self) -> None:
        """Start the wrappers, then the agents (one thread each, or the cooperative scheduler)."""
        if self._started:
            raise RuntimeError("Manager is already started")
        self._started = True
        for wrapper in self.wrappers.values():
            wrapper.start(prediction_cpus=self._agent_cpus, training_cpus=self._training_cpus)
        self._runner.start()

    def _run_agent(self, agent: Agent) -> None:
        """Play ``agent``'s games, recording episodes and errors (in the agent's thread or greenlet)."""
        play_games(agent, self._stop.is_set, self._record_episode, self._record_error)

    def _record_episode(self, record: Dict[str, float]) -> None:
        """Keep one finished episode's record."""
        with self._lock:
            self._episodes.append(record)

    def _record_error(self, error: AgentError) -> None:
        """Keep and log one agent's error."""
        with self._lock:
            self.errors.append(error)
        logger.error("%s", error)

    def pause(self) -> None:
        """Hold every agent at its next prediction (all tasks) until :meth:`resume`; for work
        that needs the weights of one moment, such as an evaluation."""
        for wrapper in self.wrappers.values():
            wrapper.pause()

    def resume(self) -> None:
        """Let the agents go on after :meth:`pause`."""
        for wrapper in self.wrappers.values():
            wrapper.resume()
        self._runner.wake()

    def running(self) -> bool:
        """Whether any agent is still playing."""
        return self._runner.running()

    def episodes(self) -> List[Dict[str, float]]:
        """Statistics of every finished episode so far, in finishing order."""
        with self._lock:
            return list(self._episodes)

    def new_episodes(self) -> List[Dict[str, float]]:
        """Episodes finished since the last call (for progress reports)."""
        with self._lock:
            new = self._episodes[self._read :]
            self._read = len(self._episodes)
        return new

    def join(self, timeout: Optional[float] = None) -> List[Dict[str, float]]:
        """Wait for every agent to finish its games, stop the wrappers, return all episode statistics."""
        self._runner.join(None if timeout is None else time.monotonic() + timeout)
        self.stop()
        return self.episodes()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop agents and wrappers; agents blocked on requests are released at once.

        Raises:
            RuntimeError: some thread did not end within ``timeout`` seconds
                (an environment step that never returns).
        """
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._runner.wake()
        for wrapper in self.wrappers.values():
            wrapper.stop(timeout=max(0.0, deadline - time.monotonic()))
        alive = self._runner.stop(deadline)
        alive += [w.task.name for w in self.wrappers.values() if w.alive]
        if alive:
            raise RuntimeError(f"threads still running {timeout} s after stop: {alive}")

    def __enter__(self) -> "Manager":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
