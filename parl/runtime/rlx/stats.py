"""What an RLX server counts, and its metric rows (docs/metrics.md, "RLX server").

    stats = ServerStats()
    stats.accepted += 1                       # the scheduler thread counts
    rows = stats.rows()                       # any thread: [(None, {"rlx/clients": 3, ...}), (120, {...})]

Counters only grow, and are written by the scheduler thread alone; :meth:`ServerStats.rows` (any one
reader thread) turns them into the interval since its last call. Clients' own metrics (their
``metrics`` messages) wait in a bounded queue, the oldest dropped (and counted) when it is full.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Deque, Dict, List, Optional, Tuple

from parl.serving.stats import PredictionTimer

#: Client metrics kept between two reads; beyond it the oldest go.
MAX_CLIENT_METRICS = 10_000

_COUNTERS = ("accepted", "refused", "errors", "timeouts", "dropped_metrics", "throttled_metrics")


class ServerStats:
    """Counters of one RLX server.

    Attributes:
        clients: connections open now.
        accepted: connections taken.
        refused: connections refused as busy (every slot taken, or memory below the floor).
        errors: connections ended for a broken frame or message, a wrong token or version.
        timeouts: connections ended by a timeout.
        act_latency: the server's part of each action's latency (from the request read to the
            action written), booked as every placement books prediction latency; ``acts`` and
            ``act_seconds`` read it.
        dropped_metrics: client metrics dropped from a full queue (unread for MAX_CLIENT_METRICS more).
        throttled_metrics: client metrics dropped for coming faster than their connection's
            ``max_metrics_per_second``.
    """

    def __init__(self) -> None:
        self.clients = 0
        self.accepted = 0
        self.refused = 0
        self.errors = 0
        self.timeouts = 0
        self.act_latency = PredictionTimer()
        self.dropped_metrics = 0
        self.throttled_metrics = 0
        self._client_metrics: Deque[Tuple[Optional[int], str, float]] = deque(maxlen=MAX_CLIENT_METRICS)
        self._last = {name: 0 for name in _COUNTERS}
        self._last_acts = (0.0, 0)

    @property
    def acts(self) -> int:
        """Actions answered so far."""
        return self.act_latency.total[0]

    @property
    def act_seconds(self) -> float:
        """The server's part of their latency, summed."""
        return self.act_latency.total[1]

    def client_metric(self, step: Optional[int], name: str, value: float) -> None:
        """Keep one client metric until :meth:`rows` reads it."""
        if len(self._client_metrics) == MAX_CLIENT_METRICS:  # the append drops the oldest
            self.dropped_metrics += 1
        self._client_metrics.append((step, name, value))

    def rows(self) -> List[Tuple[Optional[int], Dict[str, float]]]:
        """The server's row (``rlx/*``, at the robot's env steps) for the interval since the last call,
        then the clients' metrics (``client/<name>``, the mean of each name at each step)."""
        row: Dict[str, float] = {"rlx/clients": float(self.clients)}
        for name in _COUNTERS:
            value = getattr(self, name)
            row[f"rlx/{name}"] = float(value - self._last[name])
            self._last[name] = value
        acts, seconds = self.act_latency.total
        if acts > self._last_acts[1]:
            row["rlx/act_latency_ms"] = 1000.0 * (seconds - self._last_acts[0]) / (acts - self._last_acts[1])
        self._last_acts = (seconds, acts)
        sums: Dict[Optional[int], Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
        for _ in range(len(self._client_metrics)):  # what is there now; the scheduler may add more
            step, name, value = self._client_metrics.popleft()
            sums[step][f"client/{name}"].append(value)
        rows: List[Tuple[Optional[int], Dict[str, float]]] = [(None, row)]
        rows += [(step, {tag: sum(v) / len(v) for tag, v in tags.items()}) for step, tags in sums.items()]
        return rows
