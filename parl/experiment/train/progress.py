"""A console progress bar for training runs, drawn by tqdm.

    bar = ProgressBar(200_000)
    while training:
        bar.update(env_steps, recent_return, extra="eval 312.4")
    bar.close()

On a terminal tqdm redraws one line in place::

     41%|████      | 82000/200000 [00:53<01:17, 1530.00 steps/s, return 212.3  eval 312.4]

Elsewhere (a log file, CI) the same text is printed as a plain line at most
every :data:`PLAIN_INTERVAL` seconds: tqdm itself would write every redraw
into the file as carriage returns on one ever-growing line, which logs and CI
viewers show as one unreadable line.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, Optional, TextIO

from tqdm import tqdm

from parl.validation import check_int, check_range

#: Seconds between lines when the stream is not a terminal.
PLAIN_INTERVAL = 10.0
UNIT = " steps"


class ProgressBar:
    """Shows env steps against a budget, the step rate, the time left, the recent mean return and
    ``extra`` text.

    Args:
        total_steps: the env step budget (100%).
        stream: where to draw (None: ``sys.stderr`` as it is now); a terminal (``isatty()``) gets tqdm's
            line redrawn in place.
        min_interval: least seconds between redraws on a terminal.
        clock: seconds on a monotonic clock, for the plain lines off a terminal (tests pass a fake).
    """

    def __init__(
        self,
        total_steps: int,
        stream: Optional[TextIO] = None,
        min_interval: float = 0.5,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total_steps = check_int("total_steps", total_steps, 1)
        stream = sys.stderr if stream is None else stream  # read now, not when the module was imported
        self.stream = stream
        self.tty = _is_tty(stream)
        interval = check_range("min_interval", min_interval, 0.0, math.inf)
        self._clock = clock
        self._start = clock()
        self._last_line: Optional[float] = None
        self._pending: Optional[str] = None  # off a terminal: the last update's line, not yet printed
        self._closed = False
        self._bar = (
            tqdm(total=self.total_steps, file=stream, mininterval=interval, unit=UNIT, dynamic_ncols=True)
            if self.tty
            else None
        )

    def update(self, steps: int, recent_return: Optional[float], extra: str = "") -> None:
        """Report ``steps`` env steps so far and the recent mean training return (None or NaN: none yet);
        ``extra`` is appended. Drawn at most every ``min_interval`` seconds (or :data:`PLAIN_INTERVAL`
        off a terminal), and always on reaching the budget."""
        if self._closed:
            return
        postfix = _postfix(recent_return, extra)
        if self._bar is not None:
            self._bar.set_postfix_str(postfix, refresh=False)
            self._bar.update(steps - self._bar.n)
            if steps >= self.total_steps:
                self._bar.refresh()
            return
        now = self._clock()
        self._pending = tqdm.format_meter(steps, self.total_steps, now - self._start, unit=UNIT, postfix=postfix)
        if self._last_line is None or now - self._last_line >= PLAIN_INTERVAL or steps >= self.total_steps:
            self._print(now)

    def close(self) -> None:
        """Draw the last update if it is not on screen yet and end the line; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._pending is not None:
            self._print(self._clock())

    def _print(self, now: float) -> None:
        self.stream.write((self._pending or "").strip() + "\n")
        self.stream.flush()
        self._pending = None
        self._last_line = now


def _postfix(recent_return: Optional[float], extra: str) -> str:
    text = f"return {recent_return:.1f}" if recent_return is not None and math.isfinite(recent_return) else "return --"
    return f"{text}  {extra}" if extra else text


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False
