"""CheckpointManager: a robot's checkpoints, each complete or absent, the newest few kept.

    checkpoints = CheckpointManager("runs/ppo_cartpole/checkpoints", keep=3)
    checkpoints.save(manager.tasks, {"env_steps": 20000, ...}, step=20000)   # .../ckpt-0000020000
    path = checkpoints.latest()              # None before the first save
    counters = checkpoints.load(path, manager.tasks)

Layout of ``directory``::

    ckpt-0000020000/<task>.ckpt     ComputationTask.save, one file per task
    ckpt-0000020000/robot.json      {"step", "tasks", "counters"}: written last, marks the checkpoint complete
    latest                          text: the name of the newest checkpoint directory

A checkpoint is written into a hidden ``.tmp-ckpt-...`` directory, every file
and the directory synced to disk, then renamed into place (one atomic rename,
or an atomic exchange when the step's checkpoint already exists), and only
then named in ``latest`` (replaced atomically too). So a process killed at any
moment leaves every ``ckpt-*`` directory complete, and :meth:`latest` finds
the last checkpoint that was completely written. Old checkpoints are renamed
to ``.del-...`` before they are deleted; the next save clears what a killed
process left behind. One process writes a directory at a time.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import tempfile
from typing import Dict, List, Mapping, Optional, Tuple

from parl.serving.computation_task import ComputationTask
from parl.validation import check_int

#: The file that marks a checkpoint complete, and holds its counters.
ROBOT_FILE = "robot.json"
#: The file naming the newest checkpoint directory.
LATEST_FILE = "latest"
#: The file name of a task's checkpoint, from the task's name.
TASK_FILE = "{task}.ckpt"

_CHECKPOINT_DIR = re.compile(r"ckpt-(\d{10,})")
_TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_TMP_PREFIX = ".tmp-"
_DEL_PREFIX = ".del-"


class CheckpointManager:
    """Saves, finds and loads the checkpoints of one robot in ``directory``.

    Args:
        directory: where the checkpoints live (made on the first save).
        keep: checkpoints kept; each save removes the older ones beyond the newest ``keep``.
    """

    def __init__(self, directory: str, keep: int = 3) -> None:
        self.directory = directory
        self.keep = check_int("keep", keep, 1)

    def save(self, tasks: Mapping[str, ComputationTask], counters: Mapping[str, object], step: int) -> str:
        """Write checkpoint ``ckpt-<step>`` of every task and the counters; return its directory.

        A checkpoint of the same step is replaced. The tasks are saved one after the other, each
        under its own locks, so a task that trains meanwhile may be some updates ahead of one
        saved before it.

        Raises:
            ValueError: a task name cannot be a file name, or the counters are not JSON (nothing
                is written then).
        """
        step = check_int("step", step, 0)
        for name in tasks:
            if not isinstance(name, str) or not _TASK_NAME.fullmatch(name):
                raise ValueError(f"task name {name!r} cannot name a checkpoint file (letters, digits, '_', '.', '-')")
        try:
            robot = json.dumps({"step": step, "tasks": sorted(tasks), "counters": dict(counters)}, indent=1)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"checkpoint counters must be JSON (numbers, strings, lists, dicts): {exc}") from None
        os.makedirs(self.directory, exist_ok=True)
        self._remove_leftovers()
        name = f"ckpt-{step:010d}"
        staging = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-", dir=self.directory)
        try:
            for task_name, task in tasks.items():
                task.save(os.path.join(staging, TASK_FILE.format(task=task_name)))
            _write_synced(os.path.join(staging, ROBOT_FILE), robot)
            _fsync_dir(staging)
            self._move_into_place(staging, name)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._write_latest(name)
        self._remove_old(name, step)
        return os.path.join(self.directory, name)

    def latest(self) -> Optional[str]:
        """The directory ``latest`` names when it is complete, else the complete checkpoint of the
        highest step; None when there is none."""
        try:
            with open(os.path.join(self.directory, LATEST_FILE)) as f:
                named = f.read().strip()
        except OSError:
            named = ""
        if _CHECKPOINT_DIR.fullmatch(named) and _is_complete(os.path.join(self.directory, named)):
            return os.path.join(self.directory, named)
        for _, name in self._checkpoints():
            path = os.path.join(self.directory, name)
            if _is_complete(path):
                return path
        return None

    def load(self, path: str, tasks: Mapping[str, ComputationTask]) -> Dict[str, object]:
        """Restore every task from checkpoint directory ``path``; return the saved counters.

        Raises:
            ValueError: ``path`` is not a complete checkpoint, or its tasks are not those of
                ``tasks`` (checked before any task changes), or a task refuses its file.
        """
        robot = _read_robot(path)
        if robot is None:
            raise ValueError(f"{path} is not a complete checkpoint (no readable {ROBOT_FILE})")
        saved = set(robot["tasks"])
        missing, extra = sorted(set(tasks) - saved), sorted(saved - set(tasks))
        if missing or extra:
            parts = [f"has no task {n!r}" for n in missing] + [f"has task {n!r}, which the robot lacks" for n in extra]
            raise ValueError(f"checkpoint {path} {' and '.join(parts)} (robot tasks: {sorted(tasks)})")
        for name, task in tasks.items():
            task.load(os.path.join(path, TASK_FILE.format(task=name)))
        return robot["counters"]

    # -- internals ----------------------------------------------------------
    def _checkpoints(self) -> List[Tuple[int, str]]:
        """(step, name) of every ``ckpt-*`` directory, highest step first."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found = [(int(m.group(1)), n) for n in names if (m := _CHECKPOINT_DIR.fullmatch(n))]
        return sorted(found, reverse=True)

    def _move_into_place(self, staging: str, name: str) -> None:
        final = os.path.join(self.directory, name)
        if not os.path.exists(final):
            os.rename(staging, final)
        elif _exchange(staging, final):
            # ``staging`` now holds the replaced checkpoint.
            shutil.rmtree(staging, ignore_errors=True)
        else:
            # No atomic exchange here: for an instant this step has no checkpoint (older ones stay).
            self._discard(name)
            os.rename(staging, final)
        _fsync_dir(self.directory)

    def _write_latest(self, name: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{LATEST_FILE}-", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(self.directory, LATEST_FILE))
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        _fsync_dir(self.directory)

    def _remove_old(self, name: str, step: int) -> None:
        # Checkpoints of later steps belong to a run that was resumed from an earlier point.
        older = [n for s, n in self._checkpoints() if s < step and _is_complete(os.path.join(self.directory, n))]
        kept = {name, *older[: self.keep - 1]}
        for _, other in self._checkpoints():
            if other not in kept:
                self._discard(other)

    def _discard(self, name: str) -> None:
        doomed = tempfile.mkdtemp(prefix=f"{_DEL_PREFIX}{name}-", dir=self.directory)
        os.rename(os.path.join(self.directory, name), os.path.join(doomed, name))
        shutil.rmtree(doomed, ignore_errors=True)

    def _remove_leftovers(self) -> None:
        for entry in os.listdir(self.directory):
            if entry.startswith((_TMP_PREFIX, _DEL_PREFIX)):
                path = os.path.join(self.directory, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)


def _read_robot(path: str) -> Optional[dict]:
    """The parsed robot file of checkpoint ``path``, or None when it is missing or broken."""
    try:
        with open(os.path.join(path, ROBOT_FILE)) as f:
            robot = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(robot, dict) or not isinstance(robot.get("tasks"), list) or "counters" not in robot:
        return None
    return robot


def _is_complete(path: str) -> bool:
    robot = _read_robot(path)
    return robot is not None and all(
        os.path.isfile(os.path.join(path, TASK_FILE.format(task=name))) for name in robot["tasks"]
    )


def _write_synced(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    """Make the entries of directory ``path`` (new names, renames) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step (Linux ``renameat2``); False where the
    system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)
