"""Callbacks: code of your own that a training run calls as it goes, and that may stop it.

    class PrintBest(Callback):
        def __init__(self) -> None:
            self.best = float("-inf")

        def on_evaluation(self, step: int, values: Mapping[str, float]) -> Optional[str]:
            self.best = max(self.best, values["eval/mean_return"])
            print(f"{step}: best so far {self.best}")
            return None                       # a text instead stops the run, with it as the reason

A config names them as class specs (docs/configs.md), built afresh for each run:

    callbacks:
      - {class: parl.experiment.config.callbacks.EarlyStopping, metric: eval/mean_return, patience: 5}
      - {class: my_callbacks.PrintBest}

The Trainer calls every hook in its own loop, in the main thread, with the env
step count of the row and the row's tags as written to metrics.jsonl
(docs/metrics.md), in the order the config lists the callbacks:

- :meth:`Callback.on_episode_end`: each finished training episode's ``episode/*`` tags;
- :meth:`Callback.on_update`: each row of task metrics (every ``log_seconds``, 2 s in
  ``parl train``) in which a task updated, with its ``task/*`` and ``robot/*`` tags; updates run
  in the wrapper threads, so this is the interval's costs rather than one call per optimizer step;
- :meth:`Callback.on_evaluation`: each evaluation's ``eval/*`` tags;
- :meth:`Callback.on_checkpoint`: each checkpoint written, with its directory and kind
  (``periodic``, ``final`` or ``best``).

A hook that returns a text stops the run at the next turn of the loop, with the stop reason
``callback: <text>`` (the final checkpoint and evaluation follow as after any stop). A hook that
raises (or returns anything else) stops the run as a failure: the stop reason is ``callback error:
<what it raised>``, the final checkpoint and result.json are written, and the run then raises
``RunFailedError`` (``parl train`` prints one line and exits with status 1). Hooks run between
the loop's other work, so a slow one delays logging, evaluations and checkpoints (never the agents
or the updates).
"""

from __future__ import annotations

import logging
import math
from typing import Literal, Mapping, Optional, Sequence, Set

from parl.core.errors import brief
from parl.validation import ParameterError, check_choice, check_int, check_range

logger = logging.getLogger("parl")

#: The stop reason of a run a callback stopped starts with this.
CALLBACK_STOP = "callback: "
#: The stop reason of a run a callback's failure stopped starts with this.
CALLBACK_ERROR = "callback error: "
#: A callback's stop reason is kept to this many characters, on one line.
REASON_CHARS = 200


class Callback:
    """Base class of training callbacks: override the hooks you need (each does nothing here).

    Every hook gets ``step``, the env steps of all agents together, and returns None to go on
    or a text (the reason) to stop the run.
    """

    def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        """A training episode ended; ``values`` are its ``episode/*`` tags (``episode/reward``,
        ``episode/length``, and ``episode/<key>`` for each number its ``run_one_episode`` returned)."""
        return None

    def on_update(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        """A row of task metrics in which some task updated: ``task/<name>/<cost>`` (every scalar
        cost the algorithm returned, averaged over the interval), ``task/<name>/grad_norm``, ...
        and ``robot/env_steps_per_second``."""
        return None

    def on_evaluation(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        """An evaluation ended: ``eval/mean_return``, ``eval/min_return``, ``eval/max_return``,
        ``eval/episodes``."""
        return None

    def on_checkpoint(self, step: int, path: str, kind: str) -> Optional[str]:
        """A checkpoint of ``kind`` (``periodic``, ``final`` or ``best``) was written to ``path``.
        What a final checkpoint's hook returns cannot stop the run any more: it has ended."""
        return None


class Callbacks:
    """Calls a list of callbacks in order and keeps the first stop reason any of them gives.

    A hook that raises (``SystemExit`` too) or returns something other than None or a text does
    not end the loop that called it: the first such failure is kept in :attr:`error` (one line),
    its traceback goes to the ``parl`` logger, the run stops with the reason ``callback error:
    <that line>``, and the failed callback is not called again.
    """

    def __init__(self, callbacks: Sequence[Callback] = ()) -> None:
        """
        Raises:
            TypeError: an item is not a :class:`Callback`.
        """
        for index, callback in enumerate(callbacks):
            if not isinstance(callback, Callback):
                raise TypeError(f"callbacks[{index}]: expected a parl Callback, got {type(callback).__name__}")
        self.callbacks = list(callbacks)
        #: ``callback: <reason>`` once a hook asked to stop (the first one), or ``callback error:
        #: <error>`` once one failed; else None.
        self.stop_reason: Optional[str] = None
        #: One line on the first hook that failed, else None.
        self.error: Optional[str] = None
        self._failed: Set[int] = set()  # indexes of the callbacks that failed

    def episode_end(self, step: int, values: Mapping[str, float]) -> None:
        """Call every ``on_episode_end``."""
        self._call("on_episode_end", step, values)

    def update(self, step: int, values: Mapping[str, float]) -> None:
        """Call every ``on_update`` when ``values`` (a row of task metrics) holds a task's costs."""
        if any(tag.startswith("task/") and tag.endswith("/loss") for tag in values):
            self._call("on_update", step, values)

    def evaluation(self, step: int, values: Mapping[str, float]) -> None:
        """Call every ``on_evaluation``."""
        self._call("on_evaluation", step, values)

    def checkpoint(self, step: int, path: str, kind: str) -> None:
        """Call every ``on_checkpoint``."""
        self._call("on_checkpoint", step, path, kind)

    def _call(self, hook: str, *args: object) -> None:
        for index, callback in enumerate(self.callbacks):
            if index in self._failed:
                continue
            where = f"callback {type(callback).__name__}.{hook}"
            try:
                reason = getattr(callback, hook)(*args)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the run stops and saves instead
                self._fail(index, f"{where} raised {brief(exc)}", exc)
                continue
            if reason is None:
                continue
            if not isinstance(reason, str):
                self._fail(index, f"{where} returned {type(reason).__name__}; expected None or a text", None)
            elif self.stop_reason is None:
                self.stop_reason = f"{CALLBACK_STOP}{_one_line(reason)}"

    def _fail(self, index: int, line: str, exc: Optional[BaseException]) -> None:
        self._failed.add(index)
        logger.error("%s", line, exc_info=exc)
        if self.error is None:
            self.error = line
            self.stop_reason = f"{CALLBACK_ERROR}{line}"


def _one_line(text: str) -> str:
    """``text`` as one printable line of at most :data:`REASON_CHARS` characters."""
    line = " ".join(text.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


class EarlyStopping(Callback):
    """Stops a run when a metric has stopped improving, or has reached a threshold.

    The metric is any tag the run writes (``eval/mean_return``, ``episode/reward``,
    ``task/RL/loss``, an ``episode/<key>`` of your agent's); each row that holds it is one
    observation. With ``patience``, the run stops after that many observations in a row none of
    which beat the best so far by more than ``min_delta``; with ``threshold``, at the first
    observation that reaches it. ``mode`` says which way is better. Non-finite values are not
    observations.

    Args:
        metric: the tag to watch.
        patience: observations without improvement before stopping (None: no such rule).
        min_delta: how much an observation must beat the best by to count as an improvement.
        threshold: stop at the first observation at or beyond this (None: no such rule).
        mode: ``max`` (higher is better) or ``min``.

    Raises:
        ParameterError: a bad value, named.
        ValueError: neither ``patience`` nor ``threshold`` given.
    """

    def __init__(
        self,
        metric: str,
        *,
        patience: Optional[int] = None,
        min_delta: float = 0.0,
        threshold: Optional[float] = None,
        mode: Literal["max", "min"] = "max",
    ) -> None:
        if not isinstance(metric, str) or "/" not in metric:
            raise ParameterError("metric", "a tag such as 'eval/mean_return'", metric)
        check_choice("mode", mode, ("max", "min"))
        if patience is None and threshold is None:
            raise ValueError("EarlyStopping needs patience, threshold or both; got neither")
        self.metric = metric
        self.patience = None if patience is None else check_int("patience", patience, 1)
        self.min_delta = check_range("min_delta", min_delta, 0.0, math.inf)
        self.threshold = threshold
        self.sign = 1.0 if mode == "max" else -1.0
        self.best = -math.inf
        self.stale = 0  # observations since the last improvement

    def observe(self, values: Mapping[str, float]) -> Optional[str]:
        """Take ``values[metric]`` if the row holds it; the reason to stop, or None."""
        value = values.get(self.metric)
        if value is None or not math.isfinite(value):
            return None
        if self.threshold is not None and self.sign * value >= self.sign * self.threshold:
            return f"{self.metric} reached {value:g} (threshold {self.threshold:g})"
        if self.sign * value > self.best + self.min_delta:
            self.best, self.stale = self.sign * value, 0
            return None
        self.stale += 1
        if self.patience is not None and self.stale >= self.patience:
            return f"{self.metric} did not improve on {self.sign * self.best:g} in {self.stale} observations"
        return None

    def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        return self.observe(values)

    def on_update(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        return self.observe(values)

    def on_evaluation(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        return self.observe(values)
