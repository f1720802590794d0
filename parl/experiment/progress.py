"""A console progress bar for training runs.

    bar = ProgressBar(200_000)
    while training:
        bar.update(env_steps, recent_return, extra="eval 312.4")
    bar.close()

On a terminal it is one line redrawn in place::

    [########............]  41%  82,000/200,000  1,530 steps/s  return 212.3  left 1m17s  eval 312.4

Elsewhere (a log file, CI) the same text is printed as a plain line at most
every :data:`PLAIN_INTERVAL` seconds, so logs stay short.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from typing import Callable, Deque, Optional, TextIO, Tuple

from parl.validation import check_int, check_range

#: Seconds between lines when the stream is not a terminal.
PLAIN_INTERVAL = 10.0
#: Steps per second are measured over about this many recent seconds.
RATE_WINDOW = 30.0
#: Characters inside the bar's brackets.
BAR_WIDTH = 20


class ProgressBar:
    """Shows env steps against a budget, the step rate, the recent mean return and the time left.

    Args:
        total_steps: the env step budget (100%).
        stream: where to draw; a terminal (``isatty()``) gets a line redrawn with ``\\r``.
        min_interval: least seconds between redraws on a terminal.
        clock: seconds on a monotonic clock (tests pass a fake).
    """

    def __init__(
        self,
        total_steps: int,
        stream: TextIO = sys.stderr,
        min_interval: float = 0.5,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total_steps = check_int("total_steps", total_steps, 1)
        self.stream = stream
        self.tty = _is_tty(stream)
        interval = check_range("min_interval", min_interval, 0.0, math.inf)
        self.interval = interval if self.tty else max(interval, PLAIN_INTERVAL)
        self._clock = clock
        self._samples: Deque[Tuple[float, int]] = deque()  # (time, steps) at each draw, for the rate
        self._last_draw: Optional[float] = None
        self._pending: Optional[Tuple[int, Optional[float], str]] = None  # the last update not yet drawn
        self._width = 0  # length of the line on screen, to blank what a shorter line leaves
        self._closed = False

    def update(self, steps: int, recent_return: Optional[float], extra: str = "") -> None:
        """Report ``steps`` env steps so far and the recent mean training return (None or NaN: none yet);
        ``extra`` is appended to the line. Draws at most every ``min_interval`` seconds (or
        :data:`PLAIN_INTERVAL` off a terminal), and always on reaching the budget."""
        if self._closed:
            return
        self._pending = (steps, recent_return, extra)
        now = self._clock()
        due = self._last_draw is None or now - self._last_draw >= self.interval
        if due or (steps >= self.total_steps and not self._drawn_at_total()):
            self._draw(now)

    def close(self) -> None:
        """Draw the last update if it is not on screen yet and end the line; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self._pending is not None:
            self._draw(self._clock())
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()

    def line(self, steps: int, recent_return: Optional[float], extra: str, rate: Optional[float]) -> str:
        """The text of one report (without ``\\r`` or newline)."""
        fraction = min(max(steps / self.total_steps, 0.0), 1.0)
        filled = int(round(fraction * BAR_WIDTH))
        parts = [
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}]",
            f"{100 * fraction:.0f}%",
            f"{steps:,}/{self.total_steps:,}",
            f"{rate:,.0f} steps/s" if rate is not None else "-- steps/s",
            f"return {recent_return:.1f}" if _is_number(recent_return) else "return --",
        ]
        left = max(self.total_steps - steps, 0)
        if left == 0:
            parts.append("left 0s")
        elif rate is not None and rate > 0:
            parts.append(f"left {format_duration(left / rate)}")
        else:
            parts.append("left --")
        if extra:
            parts.append(extra)
        return "  ".join(parts)

    # -- drawing ------------------------------------------------------------
    def _draw(self, now: float) -> None:
        steps, recent_return, extra = self._pending
        self._pending = None
        self._last_draw = now
        self._samples.append((now, steps))
        while len(self._samples) > 2 and self._samples[1][0] <= now - RATE_WINDOW:
            self._samples.popleft()
        text = self.line(steps, recent_return, extra, self._rate())
        if self.tty:
            columns = _columns(self.stream)
            if columns is not None:
                text = text[: max(columns - 1, 20)]  # a wrapped line could not be redrawn in place
            self.stream.write("\r" + text + " " * max(self._width - len(text), 0))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _rate(self) -> Optional[float]:
        (start, first), (end, last) = self._samples[0], self._samples[-1]
        return (last - first) / (end - start) if end > start else None

    def _drawn_at_total(self) -> bool:
        return bool(self._samples) and self._samples[-1][1] >= self.total_steps


def format_duration(seconds: float) -> str:
    """``"45s"``, ``"2m31s"``, ``"1h02m"``: a short human duration."""
    seconds = int(round(max(seconds, 0.0)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _is_number(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)


def _columns(stream: TextIO) -> Optional[int]:
    """Width of the terminal ``stream`` writes to; None when it cannot be told."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError and a ValueError
        return None


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False
