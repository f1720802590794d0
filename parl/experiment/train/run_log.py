"""Where a ``parl train`` or ``parl serve`` run's log goes: every record of the ``parl`` logger in full
(tracebacks included) to ``<log_dir>/parl.log``, and on the terminal one line per warning or error.

    with run_log("runs/ppo_cartpole"):
        outcome = run_trainer(trainer)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Iterator, List, Optional, TextIO

#: The file in the log dir that gets the run's whole log.
LOG_FILE = "parl.log"

_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(filename)s:%(lineno)d %(message)s"


class _OneLine(logging.Formatter):
    """``parl: ERROR: <first line of the message>``, with no traceback (that goes to the log file)."""

    def __init__(self, log_path: Optional[str]) -> None:
        super().__init__()
        self.log_path = log_path

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().splitlines() or [""]
        more = len(lines) > 1 or record.exc_info is not None or record.stack_info is not None
        where = f" (more in {self.log_path})" if more and self.log_path is not None else ""
        return f"parl: {record.levelname}: {lines[0]}{where}"


@contextlib.contextmanager
def run_log(log_dir: str, stream: Optional[TextIO] = None) -> Iterator[Optional[str]]:
    """Within the block, the ``parl`` logger writes everything to ``<log_dir>/parl.log`` and one
    line per warning or error to ``stream`` (``sys.stderr``), instead of passing its records on to
    the root logger's handlers. Yields the log file's path (None when it cannot be opened: the
    terminal then gets the one-line records alone)."""
    logger = logging.getLogger("parl")
    path: Optional[str] = os.path.join(log_dir, LOG_FILE)
    handlers: List[logging.Handler] = []
    try:
        os.makedirs(log_dir, exist_ok=True)
        to_file = logging.FileHandler(os.path.join(log_dir, LOG_FILE), encoding="utf-8", delay=True)
        to_file.setFormatter(logging.Formatter(_FORMAT))
        to_file.setLevel(logging.INFO)
        handlers.append(to_file)
    except OSError:
        path = None  # the Trainer says why the log dir cannot be written
    to_terminal = logging.StreamHandler(sys.stderr if stream is None else stream)
    to_terminal.setFormatter(_OneLine(path))
    to_terminal.setLevel(logging.WARNING)
    handlers.append(to_terminal)
    level, propagate = logger.level, logger.propagate
    for handler in handlers:
        logger.addHandler(handler)
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(level)
        logger.propagate = propagate
