"""Where Ray and Ray Tune write while ``parl tune`` runs a sweep: ``<sweep folder>/tune.log``, not the terminal.

    with tune_log(plan.folder) as path:      # <log dir>/tune/tune.log
        ...                                  # join Ray, run the trials, leave

Within the block, the records of the ``ray`` logger and its children go to the file in full instead
of to Ray's own handlers (Tune logs a trial that failed with its traceback: ``Trial task failed for
trial trial-000_seed=1``), and so does whatever this process prints to ``sys.stdout`` and
``sys.stderr`` from any thread (Ray prints there the errors its raylets report, such as a trial's
process that died). A trial's failure reaches the terminal as one line: its row of the table.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

#: The file, in the sweep's folder, that gets what Ray and Tune log and print.
LOG_FILE = "tune.log"
#: The logger whose records (and its children's: ``ray.tune``, ``ray.train``...) go to the file.
RAY_LOGGER = "ray"

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def tune_log(folder: str) -> Iterator[str]:
    """Within the block, Ray's log records and this process's printed output go to ``<folder>/tune.log``
    (appended to; ``folder`` is made); yields its path. Ray's handlers are put back afterwards, and
    handlers added within the block are dropped."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOG_FILE)
    logger = logging.getLogger(RAY_LOGGER)
    handlers, propagate = list(logger.handlers), logger.propagate
    with open(path, "a", encoding="utf-8") as stream:
        to_file = logging.StreamHandler(stream)
        to_file.setFormatter(logging.Formatter(_FORMAT))
        logger.handlers = [to_file]
        logger.propagate = False
        try:
            with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                yield path
        finally:
            logger.handlers = handlers
            logger.propagate = propagate
