"""RayOptions: the options of placement ``"ray"``.

    manager = parl.Manager(tasks, placement=RayOptions(workers=4, address="auto"))

In a robot config they are the keys of the ``placement:`` block beside ``name: ray`` (docs/distributed.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from parl.runtime.asynchronous import SEGMENTS_IN_FLIGHT, check_asynchronous
from parl.validation import ParameterError, check_choice, check_int, check_positive

#: Runners a worker actor may play its agents with (never "processes": Ray forbids fork in actors).
WORKER_PLACEMENTS = ("cooperative", "threads")


@dataclass(frozen=True)
class RayOptions:
    """How placement ``"ray"`` runs a robot.

    Attributes:
        address: the Ray cluster to join (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``);
            None: use the Ray this process has already joined, else start a local one bound to
            127.0.0.1 that ends with the robot.
        worker_cpus: CPUs each worker actor asks Ray for (its agents and their local predictions).
        worker_resources: custom Ray resources each worker actor asks for besides (``{"sim": 1}``
            places workers on the nodes started with ``--resources '{"sim": 4}'``); None: none.
        worker_placement: how a worker plays its agents: ``"cooperative"`` (greenlets, batched
            predictions; the default) or ``"threads"`` (one thread per agent, for environments that
            block on I/O).
        broadcast_interval: updates between weight broadcasts of a task fed by replay samples;
            tasks fed by time-ordered segments (on-policy) broadcast after every update.
        sample_timeout: seconds a worker may leave a call unanswered before it is taken for lost:
            it is killed, reported and started again (it answers every ``POLL_SECONDS`` when well).
        max_staleness: a time-ordered segment (on-policy) gathered with weights more than this many
            broadcasts older than the task's latest when an update takes it is dropped, not learned,
            and counted (None: every segment is learned; 0: only segments of the latest weights).
        asynchronous: on-policy helpers hand their segments over and the workers' agents go on
            acting while the learner updates (:mod:`parl.runtime.asynchronous`); False: each agent
            waits for the update of its segment.
        segments_in_flight: segments each agent may have handed over and not yet learned when
            ``asynchronous`` (one more waits for the oldest).
        replay_shards: replay shard actors per task whose helpers keep a replay buffer (0: every
            agent keeps its own buffer, as in the other placements).
        local_cpus: CPUs of the local Ray started when no Ray is joined (None: this machine's cores,
            at least ``workers * worker_cpus``).
        workers: worker actors (None: the cluster's CPUs over ``worker_cpus``; at most one per agent).
    """

    address: Optional[str] = None
    worker_cpus: float = 1.0
    worker_resources: Optional[Mapping[str, float]] = None
    worker_placement: str = "cooperative"
    broadcast_interval: int = 10
    sample_timeout: float = 60.0
    max_staleness: Optional[int] = None
    replay_shards: int = 0
    local_cpus: Optional[int] = None
    workers: Optional[int] = None
    asynchronous: bool = False
    segments_in_flight: int = SEGMENTS_IN_FLIGHT

    def __post_init__(self) -> None:
        if self.workers is not None:
            check_int("workers", self.workers, 1)
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise ParameterError("address", "a non-empty string or None", self.address)
        check_positive("worker_cpus", self.worker_cpus)
        if self.worker_resources is not None:
            if not isinstance(self.worker_resources, Mapping) or not all(
                isinstance(k, str) and k for k in self.worker_resources
            ):
                raise ParameterError(
                    "worker_resources", "a mapping of resource names to amounts", self.worker_resources
                )
            for name, amount in self.worker_resources.items():
                check_positive(f"worker_resources.{name}", amount)
        check_choice("worker_placement", self.worker_placement, WORKER_PLACEMENTS)
        check_int("broadcast_interval", self.broadcast_interval, 1)
        check_positive("sample_timeout", self.sample_timeout)
        check_asynchronous(self.asynchronous, self.segments_in_flight, self.max_staleness)
        check_int("replay_shards", self.replay_shards, 0, 1024)
        if self.local_cpus is not None:
            check_int("local_cpus", self.local_cpus, 1)
