"""Child processes that a SIGINT or SIGTERM to this process reaches too: ``parl train --seeds``'s runs.

    with ChildProcesses() as children:                  # in the main thread: the handlers are set
        ...                                             # in other threads:
        child = children.start(command)                 # None once a signal came: nothing new starts
        status = children.wait(child)
    if children.signal is not None:
        ...                                             # what finished, and exit 128 + signal

Within the block, SIGINT and SIGTERM are forwarded to every child running (each signal, so a second
one ends runs that stop at once on their second), and once one came, :meth:`ChildProcesses.start`
starts nothing more. Each child runs in a session (and process group) of its own, so the terminal's
Ctrl-C (sent to the foreground process group) reaches it once, through this process, not twice; it
still writes to the terminal through the output it inherits.

Children are started and waited for from threads other than the main one: the handlers run in the
main thread and take the same lock as :meth:`ChildProcesses.start`.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from types import FrameType
from typing import Any, Dict, Optional, Sequence, Set

#: The signals forwarded to the children.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ChildProcesses:
    """The children started within a ``with`` block, and the first signal that came (see the module docstring).

    Attributes:
        signal: the first SIGINT or SIGTERM received within the block (None: none came).
    """

    def __init__(self) -> None:
        self.signal: Optional[int] = None
        self._lock = threading.Lock()
        self._running: Set[subprocess.Popen] = set()
        self._previous: Dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL, SIG_IGN or None

    def __enter__(self) -> "ChildProcesses":
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def start(self, command: Sequence[str], **popen: Any) -> Optional[subprocess.Popen]:
        """Start ``command`` (``subprocess.Popen`` with ``popen``, stdin from /dev/null, a session of its
        own), unless a signal came: then None."""
        with self._lock:
            if self.signal is not None:
                return None
            child = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, start_new_session=True, **popen)
            self._running.add(child)
        return child

    def wait(self, child: subprocess.Popen) -> int:
        """Wait for ``child`` to end; its exit status."""
        try:
            return child.wait()
        finally:
            with self._lock:
                self._running.discard(child)

    def _forward(self, signum: int, frame: Optional[FrameType]) -> None:
        with self._lock:
            if self.signal is None:
                self.signal = signum
            for child in self._running:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    child.send_signal(signum)
