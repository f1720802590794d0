"""Broadcaster: the learners' weights for the workers, numbered, one object in Ray's store each time.

    broadcaster = Broadcaster(ray, tasks)        # version 0: the weights the workers start from
    broadcaster.after_update("RL", every=1)      # called after each update: publishes when due
    current = broadcaster.current()              # task -> (version, [ref]), what deliveries carry

Each broadcast takes one consistent snapshot of a task's weights and input statistics
(:meth:`~parl.serving.computation_task.ComputationTask.algorithm_weights`, under the task's
weights lock) and puts it in Ray's object store once (``ray.put``); every worker fetches that
one object when a delivery tells it of a version newer than its own, and applies it under its
copy's weights lock. Versions count the broadcasts of a task from 0. A task whose weights were
replaced from outside since its last broadcast (a self-play opponent refreshed from its learner:
:attr:`~parl.serving.computation_task.ComputationTask.weights_replaced`) is broadcast with the next
update of any task.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Mapping, Tuple

import numpy as np

from parl.serving.computation_task import ComputationTask


class Broadcaster:
    """Publishes each task's weights when enough updates have passed since its last broadcast."""

    def __init__(self, ray: ModuleType, tasks: Mapping[str, ComputationTask]) -> None:
        self._ray = ray
        self._tasks = dict(tasks)
        self._lock = threading.Lock()
        self._published: Dict[str, Tuple[int, list]] = {}
        self._steps_at: Dict[str, int] = {}
        self._replaced_at: Dict[str, int] = {}
        self._listeners: List[Callable[[], None]] = []
        for name in self._tasks:
            self._publish(name, 0)

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every broadcast (a worker's delivery thread wakes up)."""
        with self._lock:
            self._listeners.append(listener)

    def after_update(self, name: str, every: int) -> bool:
        """Publish task ``name``'s weights if it made ``every`` or more optimizer steps since its last
        broadcast, and those of every task whose weights were replaced since its last; returns whether
        task ``name``'s were."""
        task = self._tasks[name]
        with self._lock:
            due = task.update_steps - self._steps_at[name] >= every
            if due:
                self._publish(name, self._published[name][0] + 1)
            replaced = [n for n, t in self._tasks.items() if t.weights_replaced != self._replaced_at[n]]
            for other in replaced:
                self._publish(other, self._published[other][0] + 1)
            listeners = list(self._listeners) if due or replaced else []
        for listener in listeners:
            listener()
        return due

    def version(self, name: str) -> int:
        """The version of task ``name``'s latest broadcast."""
        with self._lock:
            return self._published[name][0]

    def current(self) -> Dict[str, Tuple[int, list]]:
        """Task name -> (version, [object ref]) of every task's latest broadcast."""
        with self._lock:
            return dict(self._published)

    def _publish(self, name: str, version: int) -> None:
        task = self._tasks[name]
        self._steps_at[name] = task.update_steps
        self._replaced_at[name] = task.weights_replaced
        self._published[name] = (version, [self._ray.put(task.algorithm_weights())])


def writable_weights(weights: Mapping[str, object]) -> Dict[str, Any]:
    """``weights`` (nested dicts of arrays, as fetched from Ray's object store) with every read-only
    array copied, so the tasks they are set into own arrays they may write."""
    out: Dict[str, Any] = {}
    for key, value in weights.items():
        if isinstance(value, Mapping):
            out[key] = writable_weights(value)
        elif isinstance(value, np.ndarray) and not value.flags.writeable:
            out[key] = value.copy()
        else:
            out[key] = value
    return out
