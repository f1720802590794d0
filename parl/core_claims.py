"""Cores of its own for each of several robots that run side by side on one machine: trials of
``parl tune``, two ``parl train`` in two terminals, a test suite beside a run.

    with claim_cores(1) as cores:        # e.g. {1}: no other claim holds core 1 until the block ends
        Trainer(config).run()            # the robot's threads start from this thread: they stay on it

    claim = CoreClaim()                  # what a Manager does at start for the core of its agents
    core = claim.take([0, 1])            # the first of them no other robot holds (None: all held)
    claim.release()                      # at stop (or when the process ends)

A robot keeps its threads on the first core it may use (:mod:`parl.affinity`), so robots started
side by side in separate processes would all crowd the same core and leave the others idle. A
claim takes an exclusive lock (``flock``) on one file per core in a folder every process of the
machine shares, and restricts the calling thread, and so the threads it starts, to the cores it
got. The locks go when the block ends or the process dies. When fewer cores are free than asked,
nothing is claimed and the robot places its threads as it would alone. A :class:`CoreClaim` takes
the lock of one core and leaves the thread's cores alone: the Manager places its threads there, and
when every core is held (:attr:`CoreClaim.crowded`) shares the core of another robot of its own
process (:attr:`CoreClaim.same_process_core`), or, with every core another process's, leaves them to
the OS rather than crowd that process's robot on the first core for the whole run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import Counter
from typing import Iterator, List, Optional, Sequence, Set

#: Where the lock files live: one folder per machine, shared by every process on it.
CLAIMS_FOLDER = os.path.join(tempfile.gettempdir(), "parl-cores")


@contextlib.contextmanager
def claim_cores(count: int, folder: str = CLAIMS_FOLDER) -> Iterator[Optional[Set[int]]]:
    """Within the block, the calling thread runs on ``count`` cores no other claim holds; yields
    them, or None when ``count`` is 0, fewer are free, or the system has no thread affinity (the
    thread then keeps the cores it had).

    Raises:
        ValueError: ``count`` is not a whole number >= 0.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a whole number >= 0, got {count!r}")
    if count == 0 or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    held = _lock_free(sorted(before), count, folder)
    if held is None:
        yield None
        return
    cores = {core for core, _ in held}
    _HELD_HERE.update((folder, core) for core in cores)
    try:
        os.sched_setaffinity(0, cores)
        yield cores
    finally:
        os.sched_setaffinity(0, before)
        _HELD_HERE.subtract((folder, core) for core in cores)
        for _, fd in held:
            os.close(fd)  # closing drops the lock


class CoreClaim:
    """The lock on one core held for a robot's life (see the module docstring)."""

    def __init__(self, folder: Optional[str] = None) -> None:
        self.folder = CLAIMS_FOLDER if folder is None else folder  # read now: tests move it
        self.core: Optional[int] = None
        #: Whether the last :meth:`take` found every core held by another claim (False when it got one,
        #: or when the system has no file locks).
        self.crowded = False
        #: When :attr:`crowded`: a core among those asked for that another claim of this process holds
        #: (a second robot of one program, as a test's), else None: every core is another process's.
        self.same_process_core: Optional[int] = None
        self._fd: Optional[int] = None

    def take(self, cores: Sequence[int]) -> Optional[int]:
        """Lock the first of ``cores`` that no other claim holds and return it; None when every one is
        held (:attr:`crowded`) or the system has no file locks. A claim already held is given back first."""
        self.release()
        busy: List[int] = []
        held = _lock_free(list(cores), 1, self.folder, busy) if hasattr(os, "sched_getaffinity") else None
        self.crowded = held is None and len(busy) == len(cores) > 0
        ours = [core for core in busy if _HELD_HERE[(self.folder, core)] > 0] if self.crowded else []
        self.same_process_core = ours[0] if ours else None
        if held is None:
            return None
        ((self.core, self._fd),) = held
        _HELD_HERE[(self.folder, self.core)] += 1
        return self.core

    def release(self) -> None:
        """Give the core back (nothing when none is held)."""
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            _HELD_HERE[(self.folder, self.core)] -= 1
        self.core = self._fd = None


#: (folder, core) -> the claims of this process that hold it (:attr:`CoreClaim.same_process_core`).
_HELD_HERE: Counter = Counter()


def _lock_free(cores: List[int], count: int, folder: str, busy: Optional[List[int]] = None) -> Optional[List[tuple]]:
    """``count`` pairs (core, locked file descriptor) from ``cores``, or None (nothing left locked).
    ``busy``, when given, receives the cores found locked by another claim."""
    import fcntl

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    held = []
    for core in cores:
        try:
            fd = os.open(os.path.join(folder, f"cpu{core}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held by another claim
            os.close(fd)
            if busy is not None:
                busy.append(core)
            continue
        except OSError:
            os.close(fd)
            continue
        held.append((core, fd))
        if len(held) == count:
            return held
    for _, fd in held:
        os.close(fd)
    return None
