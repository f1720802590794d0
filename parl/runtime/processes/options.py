"""ProcessesOptions: the options of placement ``"processes"``.

    manager = parl.Manager(tasks, placement=ProcessesOptions(workers=4, restart_workers=True))

In a robot config they are the keys of the ``placement:`` block beside ``name: processes``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

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

    Raises:
        ParameterError: a bad value, naming the option.
    """

    workers: Optional[int] = None
    restart_workers: bool = False
    heartbeat_timeout: Optional[float] = None

    def __post_init__(self) -> None:
        if self.workers is not None:
            check_int("workers", self.workers, 1, MAX_WORKERS)
        if not isinstance(self.restart_workers, bool):
            raise ParameterError("restart_workers", "True or False", self.restart_workers)
        if self.heartbeat_timeout is not None:
            check_positive("heartbeat_timeout", self.heartbeat_timeout)
