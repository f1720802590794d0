"""Registers placement ``"processes"`` (loaded by :mod:`parl.runtime.registry` on its first look-up)."""

from __future__ import annotations

import os

from parl.runtime import registry
from parl.runtime.processes.options import ProcessesOptions


def reserve(options: ProcessesOptions) -> registry.Reservation:
    """A sweep's trial holds a CPU per worker process (one per core when ``workers`` is not set)."""
    return registry.Reservation(own_cpus=float(options.workers or os.cpu_count() or 1))


registry.register(
    "processes",
    "parl.runtime.processes.worker_pool:ProcessRunner",
    options=ProcessesOptions,
    description="agents in forked worker processes; predictions cross through shared memory",
    reserve=reserve,
)
