"""RolloutWorker: the Ray actor that plays a share of a robot's agents.

Inside the actor an ordinary :class:`~parl.Manager` runs the agents (cooperative or threads
placement, never forking), over its own copy of every task: predictions are batched and answered
here, by the copy, so acting needs no network. Training requests are not learned here: each
task's wrapper hands them to its training sink, which moves them to an :class:`Outbox` (tagged
with the weights version the copy acts with); the driver takes them with
:meth:`RolloutWorker.take`, learns them in its own wrappers, and answers them with
:meth:`RolloutWorker.deliver`, which first applies the newest weights it brings (under the
copy's weights lock, so no prediction reads half-updated weights), then wakes the agents. An
agent's helper sees the same ``learn`` / ``put_batch`` / ``take_costs`` it sees in any placement.

Agent ids: the driver's. The inner Manager gives each agent its id in the driver's Manager
(``Manager.add_agent(..., agent_id=...)``), so an agent's ``self.id``, its requests, records, errors
and counters carry the same id in a worker as in any other placement.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from parl.core.agent import Agent
from parl.core.errors import RemoteError, StoppedError
from parl.runtime.error_data import describe_agent_error, rebuild_error
from parl.runtime.manager import Manager
from parl.runtime.ray.broadcast import writable_weights
from parl.runtime.ray.replay import Allowance, ShardWriter
from parl.runtime.ray_cluster.session import unpickle_in_actor
from parl.serving.computation_wrapper import TrainingSink
from parl.serving.request_queue import Request
from parl.serving.stats import StatsSnapshot

#: A request taken for the driver: (ticket, task name, driver agent id, batch, weights version).
Outgoing = Tuple[int, str, int, object, int]
#: An answer from the driver: (ticket, costs, error) with error None or (where, error data, traceback text).
Answer = Tuple[int, Optional[Dict[str, object]], Optional[Tuple[str, Dict[str, object], Optional[str]]]]
#: Weights the driver broadcast: task name -> (version, [object ref]) (the ref in a list, so that
#: Ray hands it over as a ref and the worker fetches it only when the version is new to it).
Broadcast = Mapping[str, Tuple[int, list]]


class Outbox:
    """Training requests of the worker's agents on their way to the driver, each held until answered."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._new: List[Tuple[int, str, Request, int]] = []
        self._held: Dict[int, Request] = {}
        self._next_ticket = 0
        self._closed = False

    def put(self, task: str, requests: Sequence[Request], version: int) -> None:
        """Hold ``requests`` (of task ``task``, made with weights ``version``) for the next :meth:`take`."""
        with self._cond:
            if self._closed:
                _fail(requests)
                return
            for request in requests:
                ticket = self._next_ticket
                self._next_ticket += 1
                self._held[ticket] = request
                self._new.append((ticket, task, request, version))
            self._cond.notify_all()

    def take(self, timeout: float) -> List[Tuple[int, str, Request, int]]:
        """The requests put since the last call, waiting up to ``timeout`` seconds for one."""
        with self._cond:
            if not self._new and not self._closed:
                self._cond.wait(timeout)
            new, self._new = self._new, []
            return new

    def answer(self, ticket: int, result: Optional[Dict[str, object]], error: Optional[BaseException]) -> None:
        """Finish the request of ``ticket`` (one this outbox no longer holds is ignored: answered
        already, or failed by :meth:`close`)."""
        with self._cond:
            request = self._held.pop(ticket, None)
        if request is not None:
            request.finish(result, error)

    def close(self) -> None:
        """Fail every held request with StoppedError; later ones are failed as they come."""
        with self._cond:
            self._closed = True
            held, self._held, self._new = list(self._held.values()), {}, []
            self._cond.notify_all()
        _fail(held)


def _fail(requests: Sequence[Request]) -> None:
    for request in requests:
        request.finish(error=StoppedError("the robot was stopped before this update was learned"))


class RolloutWorker:
    """One worker actor (made a Ray actor class by :func:`parl.runtime.ray.runner.RayRunner`).

    The agents and the task settings come pickled, and are unpickled once the driver's
    ``sys.path`` entries that exist on this node are on this process's path, so classes from the
    driver's own modules (a config's ``python_path``, a test directory) are found on a machine that
    shares its files.

    Args:
        name: the worker's name in reports (``parl-ray-worker-1``).
        paths: the driver's ``sys.path``.
        robot: the pickled ``(task settings, shared parts, agents)``: the robot's tasks (each built
            again here, as a copy for acting), their shared parts (the copies share them as the
            learners do) and this worker's agents, with their helpers unbound.
        agent_ids: each agent's id in the driver's Manager.
        counters: driver id -> (episode, total_steps) to take up (a worker started again).
        placement: ``"cooperative"`` or ``"threads"``.
        weights: the weights to start from (the driver's broadcast).
        shards: task name -> replay shard actors, for tasks whose replay is distributed.
        limits: task name -> rows this worker may send to its shards for now (see
            :class:`~parl.runtime.ray.replay.Allowance`; raised by :meth:`deliver`).
        seed: seeds this worker's random generators (its sampling of actions).
    """

    def __init__(
        self,
        name: str,
        paths: Sequence[str],
        robot: bytes,
        agent_ids: Sequence[int],
        counters: Mapping[int, Tuple[int, int]],
        placement: str,
        weights: Broadcast,
        shards: Mapping[str, list],
        limits: Mapping[str, int],
        seed: int,
    ) -> None:
        from parl.seeding import seed_everything

        seed_everything(seed)
        tasks, shared, agents = unpickle_in_actor(paths, robot)
        self.name = name
        self._outbox = Outbox()
        self._versions: Dict[str, int] = {task: -1 for task in tasks}
        self._allowance = Allowance(limits)
        self.manager = Manager(
            dict(tasks),
            placement=placement,
            shared=shared,
            thread_placement="os",
            stall_seconds=None,
            training_sinks={name: self._sink(name) for name in tasks},
        )
        for task in self.manager.tasks.values():
            task.build_layers()
            task.take_input_changes()  # counting starts: what is sent back is what this copy saw
        self._apply(weights)
        self.agents: List[Agent] = agents
        self._writers: List[ShardWriter] = []
        for local, (agent, agent_id) in enumerate(zip(self.agents, agent_ids)):
            self.manager.add_agent(agent, agent.helpers, agent_id=agent_id)
            episode, steps = counters.get(agent_id, (agent.episode, -1))
            agent.episode = episode
            if steps >= 0 and hasattr(agent, "total_steps"):
                agent.total_steps = steps
            for task_name, actors in shards.items():
                writer = ShardWriter(task_name, actors, local + seed, self._allowance)
                for helper in agent.helpers.values():
                    if helper.task_name == task_name:
                        helper.store_only(writer)
                self._writers.append(writer)
        self._errors_sent = 0
        self._served: Dict[str, StatsSnapshot] = {}  # the copies' prediction counters at the last take
        self._served_lock = threading.Lock()
        self.manager.start()

    # -- called by the driver ------------------------------------------------------------
    def take(self, timeout: float) -> Dict[str, object]:
        """What the driver needs now: the training requests put since the last call (waiting up to
        ``timeout`` seconds for one), finished episodes, agent errors, live counters, the input
        statistics gathered, transitions sent to replay shards, agents in their environment, the
        predictions the copies answered since the last call, and whether any agent is still playing."""
        batches = [
            (ticket, task, request.agent_id, request.payload, version)
            for ticket, task, request, version in self._outbox.take(timeout)
        ]
        errors = self.manager.errors[self._errors_sent :]
        self._errors_sent += len(errors)
        return {
            "batches": batches,
            "episodes": self.manager.new_episodes(),
            "errors": [(e.agent_id, e.episode, describe_agent_error(e)) for e in errors],
            "counters": {a.id: (a.episode, int(getattr(a, "total_steps", -1))) for a in self.agents},
            "input_changes": {name: task.take_input_changes() for name, task in self.manager.tasks.items()},
            "stored": dict(self._allowance.sent),
            "idle": self._idle(),
            "served": self._served_since(),
            "running": self.manager.running(),
        }

    def deliver(self, answers: Sequence[Answer], weights: Broadcast, limits: Mapping[str, int]) -> int:
        """Apply the newest ``weights`` and replay ``limits``, then answer the requests of ``answers``;
        returns how many."""
        self._apply(weights)
        self._allowance.raise_to(limits)
        for ticket, costs, error in answers:
            failure = (
                None if error is None else RemoteError(error[0], rebuild_error(error[1]), remote_traceback=error[2])
            )
            self._outbox.answer(ticket, costs, failure)
        return len(answers)

    def versions(self) -> Dict[str, int]:
        """Task name -> the weights version the copy acts with."""
        return dict(self._versions)

    def pause(self) -> Dict[str, tuple]:
        """Hold every agent at its next prediction; returns once held, with the predictions the
        copies answered since the last call (as :meth:`take` gives them)."""
        self.manager.pause()
        return self._served_since()

    def resume(self) -> None:
        """Let the agents go on."""
        self.manager.resume()

    def stop(self, timeout: float) -> List[int]:
        """End the agents; returns the driver ids of those stuck in their environment."""
        self._outbox.close()
        self._allowance.close()
        return [s.agent_id for s in self.manager.stop(timeout)]

    def ping(self) -> str:
        """Answers at once (whether the actor is up) with the id of the node it runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    # -- inside ------------------------------------------------------------------------
    def _sink(self, task: str) -> TrainingSink:
        """Task ``task``'s training sink: its requests to the outbox, tagged with the copy's weights version."""
        return lambda requests: self._outbox.put(task, requests, self._versions[task])

    def _idle(self) -> Dict[int, Tuple[float, float]]:
        """Driver id -> (since when, on this worker's clock, and for how many seconds) of each agent
        in its environment now: the same ``since`` for the whole of one stay there."""
        now = time.perf_counter()
        return {agent_id: (since, now - since) for agent_id, since in self.manager.runner.idle_agents().items()}

    def _served_since(self) -> Dict[str, tuple]:
        """Task -> (batches, predictions, largest batch, (timed requests, seconds)) the copy answered
        since the last call."""
        served = {}
        with self._served_lock:  # take and pause may run at once (a threaded actor)
            for name, wrapper in self.manager.wrappers.items():
                now, before = wrapper.stats.snapshot(), self._served.get(name)
                self._served[name] = now
                served[name] = (
                    now.prediction_batches - (before.prediction_batches if before else 0),
                    now.predictions - (before.predictions if before else 0),
                    now.max_prediction_batch,
                    (
                        now.timed_predictions - (before.timed_predictions if before else 0),
                        now.prediction_seconds - (before.prediction_seconds if before else 0.0),
                    ),
                )
        return served

    def _apply(self, weights: Broadcast) -> None:
        import ray

        for name, (version, holder) in weights.items():
            if version > self._versions[name]:
                arrays = ray.get(holder[0])
                # Arrays from Ray's object store are read-only views; the copies' layers copy them in.
                self.manager.tasks[name].set_algorithm_weights(writable_weights(arrays))
                self._versions[name] = version
                self.manager.wrappers[name].weights_version = version  # what its agents stamp on their rows
                self.manager.tasks[name].given_weights_version = version  # and its predictions (V-trace's record)
