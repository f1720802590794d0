"""Placing a robot's threads on CPU cores.

Agent threads and the prediction loops hand control to each other at every
step, and only one of them can hold Python's GIL at a time. Measured on a
2-core machine, keeping them on one core makes 32 agents step about three
times faster than letting the OS move them between cores, because each
hand-off then avoids a cross-core wake-up.

Placements (``Manager(..., thread_placement=...)``):

- ``"auto"`` (default): ``"one_core"`` for robots of at most
  :data:`ONE_CORE_MAX_AGENT_THREADS` agent threads, ``"os"`` above (see
  :func:`resolve`). With a thousand agent threads on one core, the agents
  that wait for Python's lock crowd that core's run queue, and each hand-off
  of the lock waits behind them: steps come in bursts with pauses of seconds
  between them, where the OS spreads the same threads over every core and
  steps them steadily (docs/performance.md has the measurements).
- ``"one_core"``: every robot thread on one core. A training loop
  on another core gives up and re-takes the GIL around each of the ~60 small
  kernels of an update, and every re-take waits on the agents' core: measured
  with DQN on CartPole (64-64 MLP), updates ran about 4x slower than alone,
  and the example reached a greedy 475 in a median 34.6 s against 46.5 s with
  ``"split"``.
- ``"split"``: agents and prediction loops on one core, training loops on the
  others; for networks whose kernels are long enough to gain from a core of
  their own (convolutions, large batches).
- ``"os"``: no pinning.

Agent threads also run under Linux's SCHED_BATCH policy, which stops a waking
agent from preempting the running prediction loop: the loop then finishes
handing out a batch before the agents step, and the next batch holds nearly
every agent (measured with 32 agents: mean batch 31.8 instead of 18.5, and
about 1.4x the env steps per second).
"""

from __future__ import annotations

import os
from typing import List, Optional, Set, Tuple

PLACEMENTS = ("auto", "one_core", "split", "os")

#: The most agent threads ``"auto"`` keeps on one core; more are left to the OS.
ONE_CORE_MAX_AGENT_THREADS = 256


def resolve(placement: str, agent_threads: int) -> str:
    """The placement ``placement`` stands for in a robot of ``agent_threads`` agent threads: itself,
    or for ``"auto"``, ``"one_core"`` up to :data:`ONE_CORE_MAX_AGENT_THREADS` and ``"os"`` above.

    Raises:
        ValueError: ``placement`` is not one of :data:`PLACEMENTS`.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"thread_placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    if placement != "auto":
        return placement
    return "one_core" if agent_threads <= ONE_CORE_MAX_AGENT_THREADS else "os"


def plan(
    placement: str, agent_threads: int = 0, agent_core: Optional[int] = None
) -> Tuple[Optional[Set[int]], Optional[Set[int]]]:
    """``(cores for agents and prediction loops, cores for training loops)`` for ``placement`` in a
    robot of ``agent_threads`` agent threads (see :func:`resolve`). The agents' core is
    ``agent_core`` when the process may use it (the one a :class:`~parl.core_claims.CoreClaim`
    got), else the first core it may use.

    ``(None, None)`` leaves placement to the OS, as on systems without
    thread affinity or processes allowed on a single core.

    Raises:
        ValueError: ``placement`` is not one of :data:`PLACEMENTS`.
    """
    placement = resolve(placement, agent_threads)
    allowed = pinnable_cores(placement)
    if allowed is None:
        return None, None
    first = {agent_core if agent_core in allowed else allowed[0]}
    return first, (first if placement == "one_core" else set(allowed) - first)


def pinnable_cores(placement: str) -> Optional[List[int]]:
    """The cores a robot of the resolved ``placement`` may pin its threads to, in order; None when it
    pins none (``"os"``, no thread affinity, a single core)."""
    if placement == "os" or not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed if len(allowed) >= 2 else None


def configure_agent_thread(cpus: Optional[Set[int]]) -> None:
    """Pin the calling agent thread to ``cpus`` and, when pinning, mark it SCHED_BATCH (Linux only)."""
    pin_current_thread(cpus)
    if cpus and hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def pin_current_thread(cpus: Optional[Set[int]]) -> None:
    """Restrict the calling thread (not the process) to ``cpus``; no-op for None."""
    if cpus:
        os.sched_setaffinity(0, cpus)
