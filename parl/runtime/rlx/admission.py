"""Who may hold a connection to an RLX server before and after its hello: connections per address,
and the connections waiting for their hello (which hold no slot).

    admission = Admission(max_handshakes=16, max_per_address=64)
    reason = admission.refusal(host)          # None, or why this address may open no more connections
    if admission.full():                      # max_handshakes connections wait for their hello
        victim = admission.oldest_waiting()   # end it to make room (unless it came in this very poll)
    admission.opened(conn, host)              # waits for its hello
    admission.admitted(conn)                  # its hello passed: it plays a slot now
    admission.closed(conn)                    # ended, at any point

Making room ends the oldest waiting connection of the address with the most waiting, so silent
connections never lock out a client that says hello at once, and one address's flood of new
connections ends its own silent ones first.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, Hashable, Optional


class Admission:
    """The counts behind the server's admission (see the module docstring); the scheduler thread's only.

    Args:
        max_handshakes: connections waiting for their hello at once.
        max_per_address: connections open at once from one host (waiting or playing).
    """

    def __init__(self, max_handshakes: int, max_per_address: int) -> None:
        self.max_handshakes = max_handshakes
        self.max_per_address = max_per_address
        self._open: Counter = Counter()  # host -> connections open
        self._host: Dict[Hashable, str] = {}  # connection -> its host
        # host -> its connections waiting for their hello, oldest first (a dict keeps insertion order)
        self._waiting: Dict[str, Dict[Hashable, None]] = {}
        self._waiting_count = 0

    @property
    def waiting(self) -> int:
        """Connections waiting for their hello now."""
        return self._waiting_count

    def refusal(self, host: str) -> Optional[str]:
        """Why ``host`` may open no more connections now (None: it may)."""
        if self._open[host] >= self.max_per_address:
            return f"{self._open[host]} connections from {host} are open, the most one address may have"
        return None

    def full(self) -> bool:
        """Whether ``max_handshakes`` connections wait for their hello."""
        return self._waiting_count >= self.max_handshakes

    def oldest_waiting(self) -> Hashable:
        """The oldest connection waiting for its hello from the host with the most waiting (some must wait)."""
        busiest = max(self._waiting.values(), key=len)
        return next(iter(busiest))

    def opened(self, conn: Hashable, host: str) -> None:
        """``conn`` from ``host`` is open and waits for its hello."""
        self._open[host] += 1
        self._host[conn] = host
        self._waiting.setdefault(host, {})[conn] = None
        self._waiting_count += 1

    def admitted(self, conn: Hashable) -> None:
        """``conn``'s hello passed: it waits no more."""
        host = self._host[conn]
        waiting = self._waiting.get(host)
        if waiting is not None and conn in waiting:
            del waiting[conn]
            self._waiting_count -= 1
            if not waiting:
                del self._waiting[host]

    def closed(self, conn: Hashable) -> None:
        """``conn`` ended (waiting or not); nothing when it is not known."""
        if conn not in self._host:
            return
        self.admitted(conn)
        host = self._host.pop(conn)
        self._open[host] -= 1
        if not self._open[host]:
            del self._open[host]
