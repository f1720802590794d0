"""A token bucket: at most ``rate`` events a second on average, ``rate`` at once after a quiet second.

    bucket = TokenBucket(rate=50.0, now=perf_counter())
    bucket.take(perf_counter())          # True within the rate (a token is taken), False beyond it
    bucket.wait()                        # seconds until the bucket holds a token again

Each RLX connection keeps one for its ``metrics`` (``max_metrics_per_second``).
"""

from __future__ import annotations


class TokenBucket:
    """Holds up to ``rate`` tokens (full at first), refilled at ``rate`` tokens a second; each event
    takes one.

    Args:
        rate: tokens a second (> 0), and the most the bucket holds.
        now: the clock's reading when the bucket is made (seconds, any monotonic clock).
    """

    __slots__ = ("rate", "_tokens", "_at")

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self._tokens = rate
        self._at = now

    def take(self, now: float) -> bool:
        """Whether an event at ``now`` is within the rate (it then takes a token)."""
        tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        return False

    def wait(self) -> float:
        """Seconds from the last :meth:`take` until the bucket holds a token again (0.0: it holds one)."""
        return max(0.0, (1.0 - self._tokens) / self.rate)
