"""Manager: builds tasks and wrappers, runs agents, gathers episode statistics.

    manager = parl.Manager({"RL": parl.TaskSettings(algorithm_func, batching=parl.Batching(max_batchsize=64))})
    for i in range(8):
        manager.add_agent(MyAgent(make_env(), num_games=100, seed=i), {"RL": parl.ExpReplayHelper()})
    manager.start()
    episodes = manager.join()          # the last episode_window episodes' statistics
    print(manager.episode_totals())    # episodes, steps, reward sum and mean over every episode
    print(manager.errors)              # agents that failed: which, in which episode, why

What the Manager keeps of finished episodes does not grow with them
(:mod:`parl.runtime.episode_log`): running totals over every episode
(:meth:`Manager.episode_totals`, per agent :meth:`Manager.agent_episode_totals`)
and the records of the last ``episode_window`` episodes (:meth:`Manager.episodes`).
:meth:`Manager.new_episodes` hands each record out once to a reader that calls it
at least once per ``episode_window`` episodes.

Where the agents run is one setting, ``placement``: an entry of
:mod:`parl.runtime.registry`, by name (its default options) or by its options
(``placement=ProcessesOptions(workers=4)``), which the Manager hands to the
placement's runner (:mod:`parl.runtime.runner`). ``"threads"`` (default) gives
each agent its own thread; ``"cooperative"`` runs every agent as a greenlet in
one scheduler thread that batches their predictions itself (faster with many
agents); ``"processes"`` forks worker processes that run the agents, their
predictions crossing to this process's wrappers through shared memory (for
environments whose steps cost CPU); ``"ray"`` and ``"rlx"`` run them on a Ray
cluster and for remote environments. The agents' code is the same in all of
them. An agent whose episode
raises (``SystemExit`` and ``KeyboardInterrupt`` included) or returns something
other than its statistics is reported in :attr:`errors` (agent, episode,
traceback) and ends; the others go on.
:meth:`stop` ends everything within its timeout, even with agents blocked on
predictions, and returns the agents that did not stop: those stuck in their
environment (an ``env.step`` that never returns), left behind in daemon
threads (or killed with their worker process). A watchdog warns once about
each agent in its environment longer than ``stall_seconds`` (the time since
its last call to its helpers, which agents make at every step), and
:meth:`stalled` lists them (:mod:`parl.runtime.watchdog`).

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

import dataclasses
import logging
import threading
import time
from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from parl import affinity
from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper, helper_tasks
from parl.core.algorithm import Algorithm
from parl.core.errors import AgentError
from parl.core_claims import CoreClaim
from parl.moved_names import deprecated
from parl.runtime import registry
from parl.runtime.episode_log import DEFAULT_WINDOW, EpisodeLog, EpisodeTotals
from parl.runtime.old_keywords import with_old_keywords
from parl.runtime.runner import AgentRunner, Restarts, RunnerContext, play_games
from parl.runtime.task_learners import TaskLearnerProcesses, learner_builder
from parl.runtime.watchdog import StuckAgent, Watchdog, describe_stuck
from parl.serving.computation_task import ComputationTask
from parl.serving.computation_wrapper import Batching, ComputationWrapper, TrainingSink
from parl.serving.learner_collective import learner_device
from parl.serving.self_play import OpponentSnapshots, SelfPlay, check_self_play, make_snapshots
from parl.serving.shared_parts import SharedParts, share_parts
from parl.serving.skipped_updates import DEFAULT_MAX_SKIPPED_UPDATES
from parl.validation import check_int, check_positive

logger = logging.getLogger("parl")

#: Seconds in its environment after which an agent is reported as stalled (no environment step
#: of the examples takes a second; a stalled one is waiting on something that may never come).
DEFAULT_STALL_SECONDS = 60.0


@dataclass
class TaskSettings:
    """How to build one ComputationTask and its wrapper.

    Attributes:
        algorithm_func: zero-argument callable returning the Algorithm
            (see :func:`parl.create_algorithm_func`).
        batching: how the task's wrapper batches requests (:class:`~parl.serving.computation_wrapper.Batching`:
            ``max_batchsize``, ``min_batchsize``, ``max_training_batchsize``, ``training_timeout``). Those four
            given to TaskSettings itself, as parl 0.1 took them, still change it, deprecated.
        normalize_inputs: float inputs normalized by running statistics shared by all agents
            (True: all of them); see :class:`~parl.serving.computation_task.ComputationTask`.
        input_clip: bound on normalized inputs.
        reward_scale: rewards are multiplied by this before learning.
        reward_clip: then clipped to [-reward_clip, reward_clip] (None: no clipping).
        max_skipped_updates: updates in a row skipped for a non-finite loss or gradient before the task
            raises (see :class:`~parl.serving.computation_task.ComputationTask`).
        learners: processes that split each update of the task (1: the task learns itself); the task
            serves predictions and learns through them (:mod:`parl.runtime.task_learners`).
        learner_device: where those learners compute: "cpu", "gpu" (one GPU per learner; refused
            without) or "auto".
    """

    algorithm_func: Callable[[], Algorithm]
    batching: Batching = field(default_factory=Batching)
    normalize_inputs: Union[bool, Sequence[str]] = False
    input_clip: float = 10.0
    reward_scale: float = 1.0
    reward_clip: Optional[float] = None
    max_skipped_updates: int = DEFAULT_MAX_SKIPPED_UPDATES
    learners: int = 1
    learner_device: str = "cpu"
    max_batchsize: InitVar[Optional[int]] = None
    min_batchsize: InitVar[Optional[int]] = None
    max_training_batchsize: InitVar[Optional[int]] = None
    training_timeout: InitVar[Optional[float]] = None

    def __post_init__(
        self,
        max_batchsize: Optional[int],
        min_batchsize: Optional[int],
        max_training_batchsize: Optional[int],
        training_timeout: Optional[float],
    ) -> None:
        self.batching = self.batching.with_changes(
            # 3: past this method and the __init__ the dataclass wrote, to the code that made the settings
            max_batchsize,
            min_batchsize,
            max_training_batchsize,
            training_timeout,
            "TaskSettings",
            3,
        )
        self.learners = check_int("learners", self.learners, 1)
        learner_device(self.learner_device, self.learners)  # a bad name, or GPUs asked for and missing

    def __getattr__(self, name: str) -> Any:
        if name in _BATCHING_KEYWORDS:  # read as parl 0.1 read them
            deprecated(f"TaskSettings.{name}", f"TaskSettings.batching.{name}", "0.2.0")
            return getattr(self.batching, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def learner_settings(self) -> "TaskSettings":
        """These settings for one of several learners of the task: the same algorithm, without input
        normalization, reward transforms (the serving task applies them) or learners of its own."""
        return TaskSettings(self.algorithm_func, batching=self.batching, max_skipped_updates=self.max_skipped_updates)

    def make_task(self, name: str) -> ComputationTask:
        """A ComputationTask built from these settings (the Manager's, or a separate evaluator)."""
        return ComputationTask(
            name,
            self.algorithm_func(),
            normalize_inputs=self.normalize_inputs,
            input_clip=self.input_clip,
            reward_scale=self.reward_scale,
            reward_clip=self.reward_clip,
            max_skipped_updates=self.max_skipped_updates,
        )


#: TaskSettings' keywords of parl 0.1 that are fields of its ``batching`` now: the dataclass keeps them as
#: class attributes (their defaults, None); removed, so that reading one finds the batching's value.
_BATCHING_KEYWORDS = ("max_batchsize", "min_batchsize", "max_training_batchsize", "training_timeout")
for _name in _BATCHING_KEYWORDS:
    delattr(TaskSettings, _name)


class StopTimeoutError(RuntimeError):
    """Threads of a robot still ran when :meth:`Manager.stop` gave up on them.

    Attributes:
        threads: the agent threads (or the scheduler) still running, not in their environment.
        wrappers: the tasks whose wrapper threads still run (an update or prediction stuck inside
            the algorithm); when empty, no update is under way and the tasks can be saved.
    """

    def __init__(self, timeout: float, threads: List[str], wrappers: List[str]) -> None:
        self.threads = list(threads)
        self.wrappers = list(wrappers)
        super().__init__(f"threads still running {timeout} s after stop: {self.threads + self.wrappers}")


class Manager:
    """Owns a robot's tasks, wrappers and agents, and runs the agents where ``placement`` says."""

    def __init__(
        self,
        tasks: Mapping[str, TaskSettings],
        *,
        placement: object = registry.DEFAULT,
        workers: Optional[int] = None,
        restart_workers: bool = False,
        heartbeat_timeout: Optional[float] = None,
        ray: Optional[object] = None,
        rlx: Optional[object] = None,
        shared: Optional[SharedParts] = None,
        thread_placement: str = "auto",
        episode_window: int = DEFAULT_WINDOW,
        stall_seconds: Optional[float] = DEFAULT_STALL_SECONDS,
        restart_agents: int = 0,
        training_sinks: Optional[Mapping[str, TrainingSink]] = None,
        self_play: Sequence[SelfPlay] = (),
    ) -> None:
        """Build every task and its wrapper.

        Args:
            tasks: task name -> settings.
            placement: where the agents run: the name of an entry of :mod:`parl.runtime.registry`
                ("threads", the default: one thread per agent; "cooperative", "processes", "ray",
                "rlx"), which runs with its default options, or an instance of an entry's options type
                (``ProcessesOptions(workers=4)``, ``parl.RayOptions(workers=8, address="auto")``),
                handed to its runner as they are.
            workers: deprecated: the option of that name in the placement's options
                (``placement=ProcessesOptions(workers=4)``).
            restart_workers: deprecated, as ``workers``.
            heartbeat_timeout: deprecated, as ``workers``.
            ray: deprecated: ``placement=parl.RayOptions(...)``.
            rlx: deprecated: ``placement=ServerSettings(...)``.
            shared: group name -> {task name: path}, at least two tasks per group. A path is
                ``"<model attribute of the algorithm>.<attribute path in that model>"`` (e.g.
                ``"model.trunk"``, ``"model.actor_hidden"``, ``"model.layers.0"``) naming a
                LayerFunc, a nested Model or a list or dict of them, or ``"normalizer"``: the
                task's input normalizer (both tasks must normalize the same inputs). The first
                task's object replaces the others', which must have the same layer structure.
                Tasks linked by any group share their locks (see
                :meth:`ComputationTask.share_locks_with`).
            thread_placement: "auto" (default: "one_core" for at most
                :data:`parl.affinity.ONE_CORE_MAX_AGENT_THREADS` agent threads, "os" above, decided
                at :meth:`start`), "one_core" (every robot thread on one core), "split" (training
                loops on the other cores) or "os" (no pinning); see :mod:`parl.affinity`.
            episode_window: records of the most recent episodes kept for :meth:`episodes` and
                :meth:`new_episodes` (default 10,000; totals count every episode).
            stall_seconds: an agent in its environment this long (no call to its helpers) is
                stalled: warned about once per stall on the ``parl`` logger and listed by
                :meth:`stalled` (None: no watchdog).
            restart_agents: how often each agent may be restarted after an episode that failed (it
                raised, its data was refused, it returned no valid result) instead of ending as an
                error: with a fresh environment from the ``env_factory`` given to
                :meth:`add_agent` (else its own, reset), the failed episode counted as played and
                its unsent steps dropped. Each restart is counted in :attr:`restarts` and logged;
                0 (default): a failure ends the agent. Not with a placement that refuses it (ray).
            training_sinks: task name -> where that task's training requests go instead of being
                learned here (:data:`~parl.serving.computation_wrapper.TrainingSink`), for a robot
                whose tasks are copies that act for learners elsewhere (a Ray worker's).
            self_play: learners and the frozen tasks that play against them
                (:class:`~parl.serving.self_play.SelfPlay`): each opponent starts as a copy of its
                learner, is refreshed from it every ``every_updates`` of its optimizer steps, never
                learns, and takes only helpers that do not learn (:class:`~parl.PredictOnlyHelper`).

        Raises:
            ValueError: an unknown ``placement`` or ``thread_placement``, options the placement
                does not take, a feature it refuses, an ``episode_window`` below 1, a bad task
                setting, a training sink of an unknown task, or a ``shared`` group that
                names an unknown task, a path that does not exist, or parts of different structure
                (the message names ``shared.<group>.<task>``); a ``self_play`` entry naming an unknown
                task, an opponent that learns elsewhere or shares parts, or one whose models do not
                take its learner's weights.
        """
        if not tasks:
            raise ValueError("Manager needs at least one task, got none")
        self.restart_agents = check_int("restart_agents", restart_agents, 0)
        entry, options = registry.placement_and_options(placement)
        old: Dict[str, Any] = {
            "workers": workers,
            "restart_workers": restart_workers or None,
            "heartbeat_timeout": heartbeat_timeout,
        }
        old = {keyword: value for keyword, value in {**old, "ray": ray, "rlx": rlx}.items() if value is not None}
        if old:
            options = with_old_keywords(entry, options, old)
        if restart_agents and "restart_agents" in entry.refuses:
            raise ValueError(
                f"restart_agents is not available with placement {entry.name!r} (its agents end on failure)"
            )
        sinks = dict(training_sinks or {})
        unknown = sorted(set(sinks) - set(tasks))
        if unknown:
            raise ValueError(f"training_sinks for unknown tasks {unknown}; tasks are {sorted(tasks)}")
        if stall_seconds is not None:
            check_positive("stall_seconds", stall_seconds)
        self.stall_seconds = stall_seconds
        #: The placement's name (:mod:`parl.runtime.registry`).
        self.placement: str = entry.name
        #: The placement's options, as its runner got them.
        self.placement_options: object = options
        self._entry = entry
        affinity.resolve(thread_placement, 0)  # checks the name now; the cores are chosen at start
        self.thread_placement = thread_placement
        self._episodes = EpisodeLog(episode_window)
        self.tasks: Dict[str, ComputationTask] = {}
        self.wrappers: Dict[str, ComputationWrapper] = {}
        for name, settings in tasks.items():
            if not isinstance(settings, TaskSettings):
                raise ValueError(f"task {name!r}: expected TaskSettings, got {type(settings).__name__}")
            self.tasks[name] = settings.make_task(name)
        #: Names of the tasks that share parts (and so locks), one list per linked set.
        self.linked_tasks: List[List[str]] = share_parts(self.tasks, shared or {})
        for name, settings in tasks.items():
            if settings.learners > 1 and name not in sinks:  # a sink's task does not learn here
                self._learn_through_processes(name, settings)
        for name, settings in tasks.items():
            task = self.tasks[name]
            self.wrappers[name] = ComputationWrapper(
                task,
                batching=settings.batching,
                training_sink=sinks.get(name),
            )
        plays = check_self_play(list(self_play), list(self.tasks), self.linked_tasks)
        self._snapshots = make_snapshots(plays, self.tasks)
        for play in plays:
            self.wrappers[play.learner].add_update_listener(self._snapshots[play.opponent].after_update)
        #: The tasks that never learn (self-play opponents), in ``self_play`` order.
        self.frozen_tasks: List[str] = [play.opponent for play in plays]
        self.agents: List[Agent] = []
        self.errors: List[AgentError] = []
        #: Agent restarts so far (``restart_agents``), every agent together.
        self.restarts = 0
        self._restarts: Dict[int, Restarts] = {}  # agent id -> its restarts
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False
        self._core_claim = CoreClaim()  # the agents' core, held from start to stop
        context = RunnerContext(
            agents=self.agents,
            wrappers=self.wrappers,
            play=self._run_agent,
            stopping=self._stop,
            agent_cpus=None,  # set by start, once the agents are known
            record_episode=self._record_episode,
            record_error=self._record_error,
            options=options,
            task_settings=dict(tasks),
            shared=shared,
            restarts=self._restarts,
        )
        self._runner = entry.runner_class()(context)
        self._watchdog = (
            None if stall_seconds is None else Watchdog(self._runner.idle_agents, stall_seconds, self._stop)
        )
        #: The agents that did not stop at the last :meth:`stop` (what it returned).
        self.not_stopped: List[StuckAgent] = []

    def _learn_through_processes(self, name: str, settings: TaskSettings) -> None:
        """Task ``name`` learns through ``settings.learners`` processes (started at its first update)."""
        if any(name in linked for linked in self.linked_tasks):
            raise ValueError(
                f"task {name!r}: learners {settings.learners} cannot learn parts shared with other tasks; "
                "use learners: 1 or no shared parts"
            )
        learners = TaskLearnerProcesses(
            learner_builder(settings.learner_settings(), name), count=settings.learners, device=settings.learner_device
        )
        self.tasks[name].learn_through(learners)

    @property
    def runner(self) -> AgentRunner:
        """The placement's runner (for what one placement alone tells, such as the address an RLX
        server listens on, or the Ray workers lost and started again: ``RayRunner.losses``)."""
        return self._runner

    def self_play_metrics(self) -> Dict[str, float]:
        """``selfplay/<opponent>/snapshots`` of every self-play opponent: the snapshots of its learner
        taken so far in this run (since this Manager was made)."""
        values: Dict[str, float] = {}
        for snapshots in self._snapshots.values():
            values.update(snapshots.metrics())
        return values

    def self_play_pools(self) -> Dict[str, OpponentSnapshots]:
        """``selfplay-<opponent>`` -> the snapshot pool of every self-play opponent: the parts of the
        robot a checkpoint saves beside its tasks (``CheckpointManager.save(..., extras=...)``)."""
        return {f"selfplay-{name}": snapshots for name, snapshots in self._snapshots.items()}

    def environment(self, make: Callable[[], Any]) -> Any:
        """The environment for the next agent to add: ``make()`` in placements that run agents'
        environments here; placement "rlx" returns a slot that remote clients play instead, with
        the spaces of ``make()``'s environment (see :meth:`AgentRunner.environment`)."""
        return self._runner.environment(make)

    def placement_metrics(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """The placement's own metric rows since the last call, ``(step or None, {tag: value})``
        (the RLX server's ``rlx/*`` and ``client/*``; none for the others)."""
        return self._runner.metrics()

    def add_agent(
        self,
        agent: Agent,
        helpers: Mapping[str, AgentHelper],
        env_factory: Optional[Callable[[], Any]] = None,
        *,
        agent_id: Optional[int] = None,
        tasks: Optional[Mapping[str, str]] = None,
    ) -> int:
        """Bind ``agent``'s helpers, each to its task; returns the agent's id: ``agent_id``, by default its
        index among the agents.

        A helper's key names its task, unless ``tasks`` (by default the agent's
        :meth:`~parl.Agent.helper_tasks`) maps the key to one, or the helper was bound before and keeps
        its :attr:`~parl.AgentHelper.task_name`: so one agent may hold several helpers of one task, as
        an agent playing a multi-agent environment holds one per environment agent
        (``helpers={"agent_0": h0, "agent_1": h1}, tasks={"agent_0": "RL", "agent_1": "RL"}``). Each
        helper has its own end of the task's wrapper; their requests batch with all others.

        A Manager that plays a share of another's agents (a Ray worker's) gives them the other's ids, so
        each agent's ``id``, its records and its errors carry the same id wherever it runs (placement
        ``"processes"`` needs the default ids). ``env_factory`` makes a fresh environment for the agent when
        it is restarted (``restart_agents``), unless the placement's environments are remote (rlx: a
        restarted agent keeps its slot).

        Raises:
            ValueError: a helper names an unknown task, or is not an AgentHelper; ``tasks`` maps a key that
                is no helper's; ``agent_id`` is not an integer >= 0 or is another agent's.
        """
        if self._started:
            raise RuntimeError("add agents before Manager.start()")
        if not isinstance(agent, Agent):
            raise ValueError(f"expected a parl.Agent, got {type(agent).__name__}")
        if tasks is None:  # what the agent says it plays with
            tasks = {key: task for key, task in agent.helper_tasks(list(self.tasks)).items() if key in helpers}
        task_of = helper_tasks(helpers, tasks)
        unknown = sorted({task for task in task_of.values()} - set(self.tasks))
        if unknown:
            raise ValueError(f"helpers for unknown tasks {unknown}; tasks are {sorted(self.tasks)}")
        new_id = len(self.agents) if agent_id is None else check_int("agent_id", agent_id, 0)
        if any(other.id == new_id for other in self.agents):
            raise ValueError(f"agent id {new_id} is another agent's; give every agent its own agent_id")
        agent.id = new_id
        for name, helper in helpers.items():
            if not isinstance(helper, AgentHelper):
                raise ValueError(f"helper for task {name!r}: expected an AgentHelper, got {type(helper).__name__}")
            if helper.learns and task_of[name] in self.frozen_tasks:
                raise ValueError(
                    f"helper {name!r} ({type(helper).__name__}) learns, but task {task_of[name]!r} is a self-play "
                    "opponent that never learns: give it a parl.PredictOnlyHelper"
                )
            helper.task_name = task_of[name]
            helper.bind(self._runner.communicator(self.wrappers[task_of[name]], agent.id))
        agent.helpers = dict(helpers)
        self.agents.append(agent)
        if self.restart_agents:
            fresh = None if self._entry.remote_environments else env_factory  # a remote one stays its own
            self._restarts[agent.id] = Restarts(self.restart_agents, fresh)
        return agent.id

    def start(self) -> None:
        """Start the wrappers, then the agents (one thread each, or the cooperative scheduler)."""
        if self._started:
            raise RuntimeError("Manager is already started")
        self._started = True
        placement = affinity.resolve(self.thread_placement, self.agent_threads())
        allowed = affinity.pinnable_cores(placement)
        # The agents' core: one no other robot on the machine holds, while there is one. With every core
        # held, the core of another robot of this process; with every core another process's, the threads
        # are left to the OS: on the first core they would crowd that process's robot for the whole run,
        # even once other cores come free.
        claim = self._core_claim
        agent_core = claim.take(allowed) if allowed is not None else None
        thread_placement = self.thread_placement
        if claim.crowded and claim.same_process_core is not None:
            agent_core = claim.same_process_core
        elif claim.crowded:
            logger.info("every core this process may use is held by another process's robot: threads left to the OS")
            thread_placement = "os"
        agent_cpus, training_cpus = affinity.plan(thread_placement, self.agent_threads(), agent_core)
        self._runner.context = dataclasses.replace(self._runner.context, agent_cpus=agent_cpus)
        for snapshots in self._snapshots.values():
            snapshots.start()  # counts from the learner's update steps, restored ones included
        for wrapper in self.wrappers.values():
            wrapper.start(prediction_cpus=agent_cpus, training_cpus=training_cpus)
        self._runner.start()
        if self._watchdog is not None:
            self._watchdog.start()

    def agent_threads(self) -> int:
        """How many threads of this process run agents: one per agent with placement "threads", none
        otherwise (the runner's :meth:`~parl.runtime.runner.AgentRunner.agent_threads`).
        ``thread_placement="auto"`` decides by it."""
        return self._runner.agent_threads()

    def placed_threads(self) -> str:
        """The thread placement ``thread_placement`` stands for with the agents added so far (what
        :meth:`start` applies): "one_core", "split" or "os"."""
        return affinity.resolve(self.thread_placement, self.agent_threads())

    def _run_agent(self, agent: Agent) -> None:
        """Play ``agent``'s games, recording episodes and errors (in the agent's thread or greenlet)."""
        play_games(agent, self._stop.is_set, self._record_episode, self._record_error, self._restarts.get(agent.id))

    def _record_episode(self, record: Dict[str, Any]) -> None:
        """Count one finished episode and keep its record among the recent ones."""
        self._episodes.add(record)

    def _record_error(self, error: AgentError) -> None:
        """Keep and log one agent's error; count and log a restart."""
        if error.restart:
            with self._lock:
                self.restarts += 1
            logger.warning(
                "agent %d restarted (%d of %d) after episode %d failed: %s",
                error.agent_id,
                error.restart,
                self.restart_agents,
                error.episode,
                error.summary,
            )
            logger.info("the failed episode's traceback:\n%s", error.traceback_text)
            return
        with self._lock:
            self.errors.append(error)
        logger.error("%s", error)

    def pause(self) -> None:
        """Hold every agent at its next prediction (all tasks) until :meth:`resume`; for work
        that needs the weights of one moment, such as an evaluation."""
        for wrapper in self.wrappers.values():
            wrapper.pause()
        self._runner.pause()

    def resume(self) -> None:
        """Let the agents go on after :meth:`pause`."""
        self._runner.resume()
        for wrapper in self.wrappers.values():
            wrapper.resume()
        self._runner.wake()

    def running(self) -> bool:
        """Whether any agent is still playing."""
        return self._runner.running()

    @property
    def episode_window(self) -> int:
        """How many of the most recent episodes' records are kept."""
        return self._episodes.window

    def in_environment(self) -> Dict[int, float]:
        """Agent id -> seconds since its last call to its helpers, for each agent playing and waiting
        on none of them: in its environment (or its own code) now."""
        now = time.perf_counter()
        return {agent_id: now - since for agent_id, since in sorted(self._runner.idle_agents().items())}

    def stalled(self) -> Dict[int, float]:
        """The agents of :meth:`in_environment` there for ``stall_seconds`` or longer (none without
        a watchdog)."""
        limit = self.stall_seconds
        return {} if limit is None else {i: s for i, s in self.in_environment().items() if s >= limit}

    def episodes(self) -> List[Dict[str, Any]]:
        """Statistics of the last :attr:`episode_window` finished episodes (all of them while fewer
        have finished), in finishing order; :meth:`episode_totals` counts every episode."""
        return self._episodes.recent()

    def new_episodes(self) -> List[Dict[str, Any]]:
        """Episodes finished since the last call, in finishing order (for progress reports and
        metrics): each exactly once, when called at least once per :attr:`episode_window`
        episodes; records that left the window unread are counted in :attr:`missed_episodes`."""
        return self._episodes.read_new()

    @property
    def missed_episodes(self) -> int:
        """Episode records that left the window before :meth:`new_episodes` returned them."""
        return self._episodes.missed

    def episode_totals(self) -> EpisodeTotals:
        """Episodes, steps and the reward sum and mean over every finished episode."""
        return self._episodes.totals()

    def agent_episode_totals(self) -> Dict[int, EpisodeTotals]:
        """Agent id -> :meth:`episode_totals` over that agent's episodes."""
        return self._episodes.agent_totals()

    def join(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """Wait for every agent to finish its games, stop the wrappers, return :meth:`episodes`
        (the last :attr:`episode_window` episodes' statistics)."""
        self._runner.join(None if timeout is None else time.monotonic() + timeout)
        self._warn_not_stopped(self.stop())
        return self.episodes()

    def drain(self, timeout: float) -> List[str]:
        """Learn the training requests agents have sent before :meth:`stop` fails them (a step
        budget reached while the last segments wait in a queue): every wrapper learns what it holds
        without waiting for more agents (:meth:`ComputationWrapper.drain`), all within ``timeout``
        seconds in all. Agents are held at their next prediction meanwhile; the robot is to be
        stopped next. Returns the tasks not drained in time (or paused)."""
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        for wrapper in self.wrappers.values():
            wrapper.hold_predictions()  # first, for every task: no agent steps on while others drain
        self._runner.pause()  # agents that predict elsewhere (Ray workers) are held too
        return [
            name for name, wrapper in self.wrappers.items() if not wrapper.drain(max(deadline - time.monotonic(), 1e-3))
        ]

    def stop(self, timeout: float = 5.0) -> List[StuckAgent]:
        """Stop agents and wrappers; agents blocked on requests are released at once. Returns the
        agents that did not stop within ``timeout`` seconds, stuck in their environment (also kept
        in :attr:`not_stopped`): their threads go on as daemon threads (in placement "processes",
        their worker processes are killed). The wrappers have stopped then: no update is under way
        or will start, so the tasks can be saved.

        Raises:
            StopTimeoutError: a wrapper's thread did not end within ``timeout`` seconds (an update
                under way gets up to ``parl.serving.computation_wrapper.UPDATE_GRACE`` more), or an agent's
                thread (or the cooperative scheduler) while no agent is in its environment (a
                prediction or update stuck inside the algorithm).
        """
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._runner.wake()
        for wrapper in self.wrappers.values():
            wrapper.stop(timeout=max(0.0, deadline - time.monotonic()))
        try:
            alive = self._runner.stop(deadline)
        finally:
            for task in self.tasks.values():  # after the wrappers: no update is under way
                task.stop_learners()
        wrappers = [w.task.name for w in self.wrappers.values() if w.alive]
        if self._watchdog is not None:
            self._watchdog.join(max(0.0, deadline - time.monotonic()))
        self._core_claim.release()
        stuck = [StuckAgent(agent_id, seconds) for agent_id, seconds in self.in_environment().items()]
        if wrappers or (alive and not stuck):
            raise StopTimeoutError(timeout, alive, wrappers)
        self.not_stopped = stuck
        return stuck

    def _warn_not_stopped(self, stuck: List[StuckAgent]) -> None:
        if stuck:
            logger.warning("%s", describe_stuck(stuck))

    def __enter__(self) -> "Manager":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._warn_not_stopped(self.stop())
