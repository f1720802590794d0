"""ProcessesOptions: the options of placement ``"processes"``.

    manager = parl.Manager(tasks, placement=ProcessesOptions(workers=4, restart_workers=True))

In a robot config they are the keys of the ``placement:`` block beside ``name: processes``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from parl.runtime.asynchronous import SEGMENTS_IN_FLIGHT, check_asynchronous
from parl.validation import ParameterError, check_int, check_positive

#: The most worker processes: 4 per CPU (worker processes beyond the cores only wait).
MAX_WORKERS = 4 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class ProcessesOptions:
    """How placement ``"processes"`` runs a robot's agents in forked worker processes.

    Attributes:
        workers: worker processes, at most :data:`MAX_WORKERS` (None: one per core this process may
            use; at most one per agent is used).
        restart_workers: fork a worker that died (SIGKILL, a crash, silent past ``heartbeat_timeout``)
            again with its unfinished agents, instead of reporting them as failed.
        heartbeat_timeout: seconds a worker may send nothing before it is ended as one that stopped
            answering (None: :data:`~parl.runtime.processes.worker_pool.HEARTBEAT_TIMEOUT`, 20 s).
        asynchronous: on-policy helpers hand their segments over and their agents go on acting while
            the learner updates (:mod:`parl.runtime.asynchronous`); False: each waits for its update.
        segments_in_flight: segments each agent may have handed over and not yet learned when
            ``asynchronous`` (one more waits for the oldest).
        max_staleness: a segment more than this many weights versions (updates) behind the task's
            when an update takes it is dropped, not learned, and counted (None: every segment is learned).

    Raises:
        ParameterError: a bad value, naming the option.
    """

    workers: Optional[int] = None
    restart_workers: bool = False
    heartbeat_timeout: Optional[float] = None
    asynchronous: bool = False
    segments_in_flight: int = SEGMENTS_IN_FLIGHT
    max_staleness: Optional[int] = None

    def __post_init__(self) -> None:
        if self.workers is not None:
            check_int("workers", self.workers, 1, MAX_WORKERS)
        if not isinstance(self.restart_workers, bool):
            raise ParameterError("restart_workers", "True or False", self.restart_workers)
        if self.heartbeat_timeout is not None:
            check_positive("heartbeat_timeout", self.heartbeat_timeout)
        check_asynchronous(self.asynchronous, self.segments_in_flight, self.max_staleness)
