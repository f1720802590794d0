"""Staleness: how many weights versions behind the segments of each update were, and the bound.

    staleness = Staleness(max_staleness=2, latest=lambda: wrapper.weights_version)
    fresh, stale = staleness.split(segments)   # at learn time: those within the bound, those beyond
    rows = staleness.metrics("RL")             # async/RL/staleness_mean, _max, dropped_segments

A segment acted with weights version ``v`` (``Transition.behaviour_version``,
its oldest row's) is ``latest() - v`` versions behind when an update takes it:
0 for a segment of the latest weights. With ``max_staleness = k`` a segment
more than ``k`` behind is dropped, not learned, and counted. Segments without
versions (a transport that does not tell) are learned and not measured.

Counters are cumulative; :meth:`Staleness.metrics` reports the mean and the
largest staleness of the segments learned since its last call.
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from parl.validation import check_int

T = TypeVar("T")


class Staleness:
    """Measures, bounds and counts the staleness of the segments one task learns.

    Args:
        latest: the task's latest weights version now (called once per :meth:`split`).
        max_staleness: versions a segment may be behind and still be learned (None: no bound).

    Raises:
        ValueError: ``max_staleness`` is not an integer >= 0 or None.
    """

    def __init__(self, latest: Callable[[], int], max_staleness: Optional[int] = None) -> None:
        self.latest = latest
        self.max_staleness = None if max_staleness is None else check_int("max_staleness", max_staleness, 0)
        self._lock = threading.Lock()
        #: Segments dropped for being more than ``max_staleness`` versions behind, so far.
        self.dropped_segments = 0
        #: Segments learned whose staleness was measured, and the sum of their staleness, so far.
        self.measured_segments = 0
        self.total_staleness = 0
        # Segments measured since the last metrics(), the sum and the largest of their staleness.
        self._window = (0, 0, 0)

    def versions_behind(self, version: int) -> int:
        """How many versions a segment acted with weights ``version`` is behind the latest (never below 0)."""
        return max(0, int(self.latest()) - int(version))

    def split(self, items: Sequence[T], versions: Sequence[Optional[int]]) -> Tuple[List[T], List[T]]:
        """``items`` (an update's segments, each acted with weights ``versions[i]``, None: unknown) as
        (those to learn, those dropped for being beyond the bound), each in order; counts both."""
        latest = int(self.latest())
        fresh: List[T] = []
        stale: List[T] = []
        behind: List[int] = []
        for item, version in zip(items, versions):
            if version is None:
                fresh.append(item)
                continue
            lag = max(0, latest - int(version))
            if self.max_staleness is not None and lag > self.max_staleness:
                stale.append(item)
            else:
                fresh.append(item)
                behind.append(lag)
        with self._lock:
            self.dropped_segments += len(stale)
            self.measured_segments += len(behind)
            self.total_staleness += sum(behind)
            if behind:
                count, total, largest = self._window
                self._window = (count + len(behind), total + sum(behind), max(largest, *behind))
        return fresh, stale

    def metrics(self, task: str) -> Dict[str, float]:
        """``async/<task>/staleness_mean`` and ``_max`` of the segments learned since the last call
        (absent when none was measured), and ``async/<task>/dropped_segments`` so far."""
        with self._lock:
            (count, total, largest), self._window = self._window, (0, 0, 0)
            row = {f"async/{task}/dropped_segments": float(self.dropped_segments)}
        if count:
            row[f"async/{task}/staleness_mean"] = total / count
            row[f"async/{task}/staleness_max"] = float(largest)
        return row


def segment_version(versions: Optional[np.ndarray]) -> Optional[int]:
    """The version a segment was acted with: its oldest row's (``Transition.behaviour_version``);
    None when not recorded."""
    if versions is None or not np.size(versions):
        return None
    return int(np.min(versions))
