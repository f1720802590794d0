"""SIGINT and SIGTERM as the stop of a run: caught, so that ``parl train`` and ``parl serve`` end a run
cleanly whenever one comes (its final checkpoint and result.json written, exit status 0) instead of
with a traceback or Paddle's "fatal error" page.

    with CatchSignals(handler):        # within: the first SIGINT or SIGTERM calls handler(signum)
        ...                            # after it, both have their default action (a second stops at once)

    with RunSignals() as signals:      # a whole command: from before its config is loaded
        trainer = Trainer(load_config(path))
        signals.hand_to(trainer)       # a signal that came already, or comes later, stops this run
        trainer.run()

Handlers are installed in the main thread only (elsewhere the blocks do nothing).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable, Dict, Optional, Protocol, TypeVar

_Self = TypeVar("_Self", bound="CatchSignals")


class CatchSignals:
    """Within the block, the first SIGINT or SIGTERM calls ``handler`` with its number (kept as
    :attr:`received`); a second one has the signal's default action, so it stops at once.

    Args:
        handler: called in the main thread, between two of its Python instructions; it may raise
            to interrupt what the main thread does.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, handler: Callable[[int], None]) -> None:
        self.handler = handler
        #: The first signal caught (None before one).
        self.received: Optional[int] = None
        self._previous: Dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL, SIG_IGN or None

    def __enter__(self: _Self) -> _Self:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        for other in self.SIGNALS:
            signal.signal(other, signal.SIG_DFL)
        self.received = signum
        self.handler(signum)

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


class Interruptible(Protocol):
    """What :meth:`RunSignals.hand_to` stops: a :class:`~parl.experiment.train.trainer.Trainer`."""

    def interrupt(self, signum: int) -> None:
        """Stop the run as the signal ``signum`` does."""


Run = TypeVar("Run", bound=Interruptible)


class RunSignals(CatchSignals):
    """:class:`CatchSignals` around a whole command: a signal that comes before its run exists is kept
    for it, and given to it by :meth:`hand_to`."""

    def __init__(self) -> None:
        super().__init__(self._forward)
        self._run: Optional[Interruptible] = None

    def hand_to(self, run: Run) -> Run:
        """Signals stop ``run`` from now on, and one received already stops it now; returns ``run``."""
        self._run = run
        if self.received is not None:
            run.interrupt(self.received)
        return run

    def _forward(self, signum: int) -> None:
        if self._run is not None:
            self._run.interrupt(signum)
