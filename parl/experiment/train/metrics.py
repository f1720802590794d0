"""Metrics of a training run: what a Manager measures, written to TensorBoard and metrics.jsonl.

    with MetricsWriter("runs/ppo_cartpole") as writer:
        metrics = RobotMetrics(manager)                 # before manager.start()
        manager.start()
        while training:
            for episode in manager.new_episodes():
                writer.scalars(env_steps, metrics.episode_values(episode))
            writer.scalars(env_steps, metrics.collect(env_steps))   # every few seconds

Every tag, its meaning and unit: ``docs/metrics.md``. The step of every row
is the env step count of all agents together.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Set, TextIO, TypeVar

import numpy as np

from parl.runtime.manager import Manager
from parl.serving.stats import StatsSnapshot, Total
from parl.validation import check_int

logger = logging.getLogger("parl")

#: The file of one JSON object per row, in the log directory.
METRICS_FILE = "metrics.jsonl"
#: Keys of every JSON row besides the tags.
ROW_KEYS = ("step", "time")
#: Seconds between flushes of the TensorBoard event file (rows of metrics.jsonl are flushed each).
EVENTS_FLUSH_SECONDS = 10.0
#: The cost that counts skipped optimizer steps (``ComputationTask.learn``), reported as a count.
SKIPPED = "skipped_updates"
_NONE: Total = (0.0, 0, 0)
#: The prefix of every episode tag, the numbers an agent's ``run_one_episode`` returns among them.
EPISODE_PREFIX = "episode/"
#: Keys of an episode record that are written under tags of their own, or not at all.
_RECORD_KEYS = frozenset({"agent_id", "episode", "reward", "steps", "seconds"})
#: ``episode/*`` tags parl derives itself; an agent's key of the same name is not written.
_DERIVED_KEYS = frozenset({"length", "reward_per_second"})
_warned_keys: Set[str] = set()


class MetricsWriter:
    """Writes rows of scalars to ``<log_dir>/metrics.jsonl`` and, optionally, to TensorBoard event files.

    Each :meth:`scalars` call appends one line ``{"step": 1200, "time": 1700000000.123, "<tag>": value, ...}``
    (``time`` in Unix seconds) and flushes it, so the file can be read while the
    run goes on; runs resumed in the same directory append to it. Non-finite
    values (a diverged loss) are written as ``null`` in JSON, which has no NaN,
    and as they are to TensorBoard, which shows them. TensorBoard events are
    written in the calling thread and flushed every :data:`EVENTS_FLUSH_SECONDS`.

    A file that cannot be written (a full disk, a directory that became read-only) turns the
    writer off: ``report`` gets one line naming the file and why, and later rows are dropped;
    the run that writes them goes on. Metrics are not retried, so the files end at a row
    boundary, or in the one row being written when the write failed.

    Safe to call from several threads. Use as a context manager, or call :meth:`close`.

    Args:
        log_dir: the run's directory (created if missing).
        tensorboard: also write TensorBoard event files (tensorboardX's format) to ``log_dir``.
        report: where the line about a failed write goes (default: a line on stderr).
    """

    def __init__(
        self, log_dir: str, *, tensorboard: bool = True, report: Optional[Callable[[str], None]] = None
    ) -> None:
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, METRICS_FILE)
        self._report = report or report_stderr
        self._lock = threading.Lock()
        self._closed = False
        #: Why writing stopped (one line), or None while the writer writes.
        self.failure: Optional[str] = None
        self._file: Optional[TextIO] = None
        self._events: Any = None
        self._events_flushed = time.monotonic()
        try:
            os.makedirs(log_dir, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # closed by close()
            if tensorboard:
                from tensorboardX.event_file_writer import EventsWriter  # imported here: slow

                self._events = EventsWriter(os.path.join(log_dir, "events"))
        except OSError as exc:
            self._fail(exc, self.path if self._file is None else self._events_path())

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Write one row of ``values`` (tag -> number) at env step ``step``; an empty mapping writes
        nothing, and so does a writer turned off by a failed write.

        Raises:
            ValueError: ``step`` is not an integer >= 0, a tag is not a non-empty string or is one of
                :data:`ROW_KEYS`, or a value is not a number.
            RuntimeError: the writer is closed.
        """
        step = check_int("step", step, 0)
        row: Dict[str, Optional[float]] = {}
        numbers: Dict[str, float] = {}
        for tag, value in values.items():
            if not isinstance(tag, str) or not tag or tag in ROW_KEYS:
                raise ValueError(f"metric tags must be non-empty strings other than {list(ROW_KEYS)}, got {tag!r}")
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"metric {tag!r} must be a number, got {value!r}") from None
            numbers[tag] = number
            row[tag] = finite_or_none(number)
        if not numbers:
            return
        now = time.time()
        line = json.dumps({"step": step, "time": round(now, 3), **row}, allow_nan=False)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the MetricsWriter of {self.log_dir} is closed")
            if self.failure is not None:
                return
            assert self._file is not None  # open while neither closed nor failed
            try:
                self._file.write(line + "\n")
                self._file.flush()
            except OSError as exc:
                self._fail(exc, self.path)
                return
            if self._events is not None:
                try:
                    self._write_events(step, numbers, now)
                except OSError as exc:
                    self._fail(exc, self._events_path())

    def _write_events(self, step: int, numbers: Mapping[str, float], now: float) -> None:
        from tensorboardX.proto import event_pb2
        from tensorboardX.summary import scalar

        for tag, number in numbers.items():
            self._events.write_event(event_pb2.Event(summary=scalar(tag, number), wall_time=now, step=step))
        if time.monotonic() - self._events_flushed >= EVENTS_FLUSH_SECONDS:
            self._events.flush()
            self._events_flushed = time.monotonic()

    def _events_path(self) -> str:
        return getattr(self._events, "_file_name", os.path.join(self.log_dir, "events.out.tfevents.*"))

    def _fail(self, exc: OSError, path: str) -> None:
        """Turn the writer off after ``exc`` on ``path``: one line to ``report``, both outputs closed quietly."""
        self.failure = f"{exc.filename or path} not written: {exc.strerror or exc}"
        self._report(f"parl: metrics off, {self.failure}; training goes on")
        self._close_outputs()

    def _close_outputs(self) -> None:
        """Close both outputs; a failed write among the buffered rows is reported (once) and ignored."""
        outputs = [(self._file, self.path), (self._events, self._events_path())]
        self._file, self._events = None, None
        for output, path in outputs:
            if output is None:
                continue
            try:
                output.close()
            except OSError as exc:
                if self.failure is None:
                    self._fail(exc, path)

    def close(self) -> None:
        """Flush and close both outputs; later calls do nothing. A failed final flush is reported in
        one line, as a failed write is."""
        with self._lock:
            self._closed = True
            self._close_outputs()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_Value = TypeVar("_Value")


def finite_or_none(value: _Value) -> Optional[_Value]:
    """``value``, or None for a float that is NaN or infinite: what JSON files of parl hold for a figure
    that has none (``json.dumps`` would write ``NaN``, which is not JSON)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def report_stderr(line: str) -> None:
    """Print one report line on ``sys.stderr`` as it is now (the default ``report`` of the writers here
    and of :class:`~parl.experiment.train.checkpoints.CheckpointManager`)."""
    print(line, file=sys.stderr, flush=True)


class RobotMetrics:
    """Turns a Manager's episode records and its wrappers' counters into tagged scalars.

    Making it switches on gradient-norm tracking in every task (a few tensor ops
    per optimizer step unless the optimizer clips by norm and has the norm already).

    Args:
        manager: the robot; make this before ``manager.start()`` so the first interval starts with the run.
        start_env_steps: env steps already taken (a resumed run), the base of the first
            ``robot/env_steps_per_second``.
        clock: seconds on a monotonic clock (tests pass a fake).
    """

    def __init__(
        self, manager: Manager, *, start_env_steps: int = 0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._wrappers = dict(manager.wrappers)
        self._manager = manager
        for task in manager.tasks.values():
            task.track_grad_norm = True
        self._clock = clock
        self._last_time = clock()
        self._last_steps = check_int("start_env_steps", start_env_steps, 0)
        self._last: Dict[str, StatsSnapshot] = {name: w.stats.snapshot() for name, w in self._wrappers.items()}

    @staticmethod
    def episode_values(episode: Mapping[str, Any]) -> Dict[str, float]:
        """The ``episode/*`` tags of one record of ``Manager.new_episodes()``.

        ``reward``, ``steps`` and ``seconds`` give ``episode/reward``, ``episode/length``,
        ``episode/seconds`` and ``episode/reward_per_second``; a key the record lacks gives no tag.
        Every other number ``run_one_episode`` returned (an int, a float, a bool as 0 or 1, a numpy
        scalar) is written as ``episode/<key>``: ``{"subgoals_reached": 2}`` gives
        ``episode/subgoals_reached``. Other values (lists, arrays, text) and the record's
        ``agent_id`` and ``episode`` are not written; an agent's own ``length`` or
        ``reward_per_second``, which parl writes itself, is left out with a warning (once per key).
        """
        values: Dict[str, float] = {}
        reward = episode.get("reward")
        seconds = episode.get("seconds")
        if reward is not None:
            values["episode/reward"] = float(reward)
        if episode.get("steps") is not None:
            values["episode/length"] = float(episode["steps"])
        if seconds is not None:
            values["episode/seconds"] = float(seconds)
            if reward is not None and seconds > 0:
                values["episode/reward_per_second"] = float(reward) / float(seconds)
        for key, value in episode.items():
            if key in _RECORD_KEYS or not isinstance(key, str) or not _is_scalar(value):
                continue
            if key in _DERIVED_KEYS:
                _warn_shadowed(key)
                continue
            values[f"{EPISODE_PREFIX}{key}"] = float(value)
        return values

    def collect(self, env_steps: int) -> Dict[str, float]:
        """``robot/env_steps_per_second`` (and ``robot/agent_restarts``, the restarts so far, with
        ``restart_agents``) and every task's ``task/<name>/*`` tags over the interval
        since the previous call (or since this object was made), ``updates_per_env_step`` among them
        when the interval has env steps; with self-play, ``selfplay/<opponent>/snapshots`` (the
        snapshots of its learner taken so far).

        Means over the interval (costs, batch sizes, latency, gradient norm) are
        left out when the interval holds nothing to average: a task that did no
        update reports no costs rather than zeros. A cost or gradient norm that
        was not finite in any update of the interval is reported as NaN.
        """
        env_steps = check_int("env_steps", env_steps, 0)
        now = self._clock()
        seconds = now - self._last_time
        values: Dict[str, float] = {}
        if seconds > 0 and env_steps >= self._last_steps:
            values["robot/env_steps_per_second"] = (env_steps - self._last_steps) / seconds
        if self._manager.restart_agents:
            values["robot/agent_restarts"] = float(self._manager.restarts)
        values.update(self._manager.self_play_metrics())
        for name, wrapper in self._wrappers.items():
            snapshot = wrapper.stats.snapshot()
            values.update(task_values(name, self._last[name], snapshot, seconds))
            if env_steps > self._last_steps:
                # The achieved update-to-data ratio (a replay helper's updates_per_step, once warm).
                updates = snapshot.updates - self._last[name].updates
                values[f"task/{name}/updates_per_env_step"] = updates / (env_steps - self._last_steps)
            self._last[name] = snapshot
        self._last_time, self._last_steps = now, env_steps
        return values


def _is_scalar(value: object) -> bool:
    """Whether ``value`` is one number (bools and numpy scalars included)."""
    return isinstance(value, (numbers.Real, np.bool_))


def _warn_shadowed(key: str) -> None:
    if key not in _warned_keys:
        _warned_keys.add(key)
        logger.warning(
            "run_one_episode returned %r, which is not written: parl writes episode/%s itself; rename it",
            key,
            key,
        )


def task_values(name: str, before: StatsSnapshot, after: StatsSnapshot, seconds: float) -> Dict[str, float]:
    """The ``task/<name>/*`` tags of the interval between two snapshots ``seconds`` apart."""
    prefix = f"task/{name}/"
    values: Dict[str, float] = {}
    updates = after.updates - before.updates
    if updates > 0:
        for cost, total in after.costs.items():
            mean = _mean_since(before.costs.get(cost, (0.0, 0, 0)), total)
            if mean is not None and cost != SKIPPED:
                values[prefix + cost] = mean
        # A count, not a mean: the optimizer steps skipped for a non-finite loss or gradient.
        values[prefix + SKIPPED] = after.costs.get(SKIPPED, _NONE)[0] - before.costs.get(SKIPPED, _NONE)[0]
        values[prefix + "training_batch"] = (after.training_rows - before.training_rows) / updates
    grad_norm = _mean_since(before.grad_norm, after.grad_norm)
    if grad_norm is not None:
        values[prefix + "grad_norm"] = grad_norm
    if after.learning_rate is not None:
        values[prefix + "learning_rate"] = after.learning_rate
    if seconds > 0:
        values[prefix + "updates_per_second"] = updates / seconds
    batches = after.prediction_batches - before.prediction_batches
    if batches > 0:
        values[prefix + "prediction_batch"] = (after.predictions - before.predictions) / batches
    timed = after.timed_predictions - before.timed_predictions
    if timed > 0:
        values[prefix + "prediction_latency_ms"] = (
            1000.0 * (after.prediction_seconds - before.prediction_seconds) / timed
        )
    return values


def _mean_since(before: Total, after: Total) -> Optional[float]:
    """Mean of the values added between two totals; NaN if one was not finite; None if none was added."""
    count = after[1] - before[1]
    if count <= 0:
        return None
    if after[2] > before[2]:
        return math.nan
    return (after[0] - before[0]) / count
