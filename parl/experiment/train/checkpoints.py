"""CheckpointManager: a robot's checkpoints, each complete or absent, the newest few kept.

    checkpoints = CheckpointManager("runs/ppo_cartpole/checkpoints", keep=3)
    checkpoints.save(manager.tasks, {"env_steps": 20000, ...}, step=20000)   # .../ckpt-0000020000
    path = checkpoints.latest()              # None before the first save
    counters = checkpoints.load(path, manager.tasks)
    found = checkpoints.load_latest(manager.tasks)   # (path, counters) of the newest intact one, or None

Layout of ``directory``::

    ckpt-0000020000/<task>.json         ComputationTask.save: metadata, manifest and checksums
    ckpt-0000020000/<task>.safetensors  ComputationTask.save: the task's arrays
    ckpt-0000020000/extras/<name>.safetensors
                                        a part of the robot saved beside its tasks (a self-play
                                        opponent's snapshot pool, ``selfplay-<opponent>``)
    ckpt-0000020000/robot.json          {"step", "tasks", "counters", "files"}: written last, marks
                                        the checkpoint complete; "files" holds the SHA-256 of each task
                                        and extra file
    latest                          text: the name of the newest checkpoint directory
    best/ckpt-0000012000/...            the checkpoint of the best evaluation (best_checkpoints)
    best/latest

A checkpoint is written into a hidden ``.tmp-ckpt-...`` directory, every file
and the directory synced to disk, then renamed into place (one atomic rename,
or an atomic exchange when the step's checkpoint already exists), and only
then named in ``latest`` (replaced atomically too). So a process killed at any
moment leaves every ``ckpt-*`` directory complete, and :meth:`latest` finds
the last checkpoint that was completely written. Old checkpoints are renamed
to ``.del-...`` before they are deleted; the next save clears what a killed
process left behind. One process writes a directory at a time.

Reading verifies every file (:mod:`parl.serving.checkpoint_format`) before any
task changes; :meth:`CheckpointManager.load_latest` skips damaged checkpoints,
reporting each in one line, and loads the newest intact one. A save that cannot
write (a full disk, a read-only directory) raises :class:`CheckpointWriteError`
and leaves the older checkpoints as they were.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple

from parl.experiment.train.metrics import report_stderr
from parl.experiment.train.robot_file import ROBOT_FILE, has_robot, read_robot
from parl.serving.checkpoint_format import ARRAYS_SUFFIX, TASK_NAME, CheckpointError, arrays_path
from parl.serving.computation_task import ComputationTask, TaskCheckpoint
from parl.serving.safe_files import FileCheckError, read_regular_file
from parl.validation import check_int

#: The file naming the newest checkpoint directory.
LATEST_FILE = "latest"
#: The largest ``latest`` file read (it holds one directory name).
MAX_LATEST_BYTES = 256
#: The file name of a task's checkpoint metadata, from the task's name (its arrays: ``{task}.safetensors``).
TASK_FILE = "{task}.json"
#: The ending of a task file of the pickle format before (``<task>.ckpt``), refused when found.
LEGACY_SUFFIX = ".ckpt"
#: The subdirectory of a run's checkpoints directory holding the checkpoint of its best evaluation,
#: and the word ``parl eval --checkpoint`` and ``parl export --checkpoint`` take for it.
BEST = "best"

_CHECKPOINT_DIR = re.compile(r"ckpt-(\d{10,})")
_TMP_PREFIX = ".tmp-"
_DEL_PREFIX = ".del-"


#: The subdirectory of a checkpoint holding its extra files (:class:`CheckpointExtra`).
EXTRAS_DIR = "extras"


class CheckpointExtra(Protocol):
    """A part of a robot saved beside its tasks, as one file of each checkpoint (a self-play opponent's
    snapshot pool, :class:`~parl.serving.self_play.OpponentSnapshots`)."""

    def write_checkpoint_file(self, path: str) -> None:
        """Write the part as file ``path`` (OSError when it cannot)."""

    def read_checkpoint_file(self, path: str, sha256: Optional[str]) -> Callable[[], None]:
        """Read and verify file ``path`` against ``sha256`` without changing anything (CheckpointError
        when it does not fit); return what takes it up."""


def extra_file(name: str) -> str:
    """The file of extra ``name`` in a checkpoint directory, as its robot file records it."""
    return f"{EXTRAS_DIR}/{name}{ARRAYS_SUFFIX}"


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written (a full disk, a read-only directory); the message is
    one line, and the older checkpoints are left as they were."""


class NotWritableError(OSError):
    """A log or checkpoint directory that cannot be written; the message is one line naming it."""


class CheckpointManager:
    """Saves, finds and loads the checkpoints of one robot in ``directory``.

    Args:
        directory: where the checkpoints live (made on the first save).
        keep: checkpoints kept; each save removes the older ones beyond the newest ``keep``.
    """

    def __init__(self, directory: str, keep: int = 3) -> None:
        self.directory = directory
        self.keep = check_int("keep", keep, 1)

    def save(
        self,
        tasks: Mapping[str, ComputationTask],
        counters: Mapping[str, object],
        step: int,
        extras: Optional[Mapping[str, CheckpointExtra]] = None,
    ) -> str:
        """Write checkpoint ``ckpt-<step>`` of every task, each of ``extras`` (name -> part, a file
        each: :func:`extra_file`) and the counters; return its directory.

        A checkpoint of the same step is replaced. The tasks are saved one after the other, each
        under its own locks, so a task that trains meanwhile may be some updates ahead of one
        saved before it.

        Raises:
            ValueError: a task name cannot be a file name, or the counters are not JSON (nothing
                is written then).
            CheckpointWriteError: a file could not be written (a full disk, a read-only
                directory); the older checkpoints are left as they were.
        """
        step = check_int("step", step, 0)
        extras = dict(extras or {})
        for name in [*tasks, *extras]:
            if not isinstance(name, str) or not TASK_NAME.fullmatch(name):
                raise ValueError(f"name {name!r} cannot name a checkpoint file (letters, digits, '_', '.', '-')")
        try:
            robot = json.dumps({"step": step, "tasks": sorted(tasks), "counters": dict(counters)}, indent=1)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"checkpoint counters must be JSON (numbers, strings, lists, dicts): {exc}") from None
        name = f"ckpt-{step:010d}"
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._remove_leftovers()
            staging = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-", dir=self.directory)
        except OSError as exc:
            raise CheckpointWriteError(f"checkpoint {name} not written in {self.directory}: {_reason(exc)}") from None
        try:
            files = {}
            for task_name, task in tasks.items():
                task.save(os.path.join(staging, TASK_FILE.format(task=task_name)))
                for file_name in _task_files(task_name):
                    files[file_name] = _file_sha256(os.path.join(staging, file_name))
            if extras:
                os.makedirs(os.path.join(staging, EXTRAS_DIR))
            for extra_name, extra in extras.items():
                file_name = extra_file(extra_name)
                extra.write_checkpoint_file(os.path.join(staging, file_name))
                files[file_name] = _file_sha256(os.path.join(staging, file_name))
            if extras:
                _fsync_dir(os.path.join(staging, EXTRAS_DIR))
            robot = json.dumps({**json.loads(robot), "files": files}, indent=1)
            _write_synced(os.path.join(staging, ROBOT_FILE), robot)
            _fsync_dir(staging)
            self._move_into_place(staging, name)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise CheckpointWriteError(f"checkpoint {name} not written in {self.directory}: {_reason(exc)}") from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            self._write_latest(name)
            self._remove_old(name, step)
        except OSError as exc:
            # The checkpoint itself is complete and in place; latest() finds it by its step.
            raise CheckpointWriteError(
                f"checkpoint {name} written, but {LATEST_FILE} or old checkpoints not updated: {_reason(exc)}"
            ) from None
        return os.path.join(self.directory, name)

    def latest(self) -> Optional[str]:
        """The directory ``latest`` names when it is complete, else the complete checkpoint of the
        highest step; None when there is none. (Only the files' presence is checked here; see
        :meth:`load_latest` for a checkpoint that is also intact.)"""
        return next((path for path in self._candidates() if _is_complete(path)), None)

    def load_latest(
        self,
        tasks: Mapping[str, ComputationTask],
        report: Optional[Callable[[str], None]] = None,
        check_counters: Optional[Callable[[Mapping[str, object]], None]] = None,
        extras: Optional[Mapping[str, CheckpointExtra]] = None,
    ) -> Optional[Tuple[str, Dict[str, Any]]]:
        """Restore every task from the newest intact checkpoint; return its directory and counters,
        or None when there is no checkpoint at all.

        A checkpoint that fails verification (its robot file or counters included) is skipped:
        ``report`` (default: a line on stderr) gets one line naming it and why, and the next older
        one is tried. A ``latest`` file that names no complete checkpoint is reported the same way.

        Args:
            check_counters: raises ValueError when the saved counters are not what the caller can
                restore (see :meth:`load`).

        Raises:
            CheckpointError: there are checkpoints, but none of them is intact and fits ``tasks``
                (the message names the newest and why it was refused).
        """
        report = report or report_stderr
        candidates = self._candidates()
        if not any(_is_complete(path) for path in candidates):  # old checkpoints only when nothing else is there
            legacy = self._legacy_checkpoints()
            if legacy:
                raise CheckpointError(_legacy_message(legacy[0]))
        named, problem = self._named_latest()
        if problem is not None:
            report(f"parl: {os.path.join(self.directory, LATEST_FILE)} ignored: {problem}")
        first_error: Optional[CheckpointError] = None
        for path in candidates:
            try:
                return path, self.load(path, tasks, check_counters, extras, report)
            except CheckpointError as exc:
                first_error = first_error or exc
                report(f"parl: skipped checkpoint {path}: {exc}")
        if first_error is not None:
            raise CheckpointError(f"no intact checkpoint in {self.directory}; the newest: {first_error}")
        return None

    def load(
        self,
        path: str,
        tasks: Mapping[str, ComputationTask],
        check_counters: Optional[Callable[[Mapping[str, object]], None]] = None,
        extras: Optional[Mapping[str, CheckpointExtra]] = None,
        report: Optional[Callable[[str], None]] = None,
    ) -> Dict[str, Any]:
        """Restore every task, and each of ``extras`` the checkpoint holds, from checkpoint directory
        ``path``; return the saved counters. An extra the checkpoint lacks (one written before it had
        that part) is left as it is, and ``report`` (default: a line on stderr) says so.

        Every file is verified (its kind and size, checksums, shapes, dtypes, finite weights, the
        tasks' models, optimizer state and input statistics) and the counters are given to
        ``check_counters``, before any task changes.

        Args:
            check_counters: raises ValueError (one line) when the saved counters are not what the
                caller can restore: the checkpoint is then refused as damaged.

        Raises:
            CheckpointError: (a ValueError) ``path`` is not a complete checkpoint, is of the old
                pickle format, is damaged, or its tasks are not those of ``tasks``; one line.
        """
        if not has_robot(path):
            if _is_legacy(path):
                raise CheckpointError(_legacy_message(path))
            raise CheckpointError(f"{path} is not a complete checkpoint (no {ROBOT_FILE})")
        try:
            robot = read_robot(path)
        except CheckpointError:
            if _is_legacy(path):
                raise CheckpointError(_legacy_message(path)) from None
            raise
        saved = set(robot["tasks"])
        missing, extra = sorted(set(tasks) - saved), sorted(saved - set(tasks))
        if missing or extra:
            parts = [f"has no task {n!r}" for n in missing] + [f"has task {n!r}, which the robot lacks" for n in extra]
            raise CheckpointError(f"checkpoint {path} {' and '.join(parts)} (robot tasks: {sorted(tasks)})")
        files = robot.get("files")
        if not isinstance(files, dict) and _is_legacy(path):
            raise CheckpointError(_legacy_message(path))
        if not isinstance(files, dict):
            raise CheckpointError(f"{os.path.join(path, ROBOT_FILE)} has no file checksums")
        if check_counters is not None:
            try:
                check_counters(robot["counters"])
            except ValueError as exc:
                raise CheckpointError(f"{os.path.join(path, ROBOT_FILE)}: counters: {exc}") from None
        # Every task file is read (once, within its bound) and verified before any task changes.
        read: List[Tuple[ComputationTask, TaskCheckpoint]] = []
        for name, task in tasks.items():
            task_path = os.path.join(path, TASK_FILE.format(task=name))
            read.append((task, task.read_checkpoint(task_path, files, ROBOT_FILE)))
        take_up: List[Callable[[], None]] = []
        for extra_name, part in (extras or {}).items():
            file_name = extra_file(extra_name)
            if file_name not in files:
                (report or report_stderr)(f"parl: checkpoint {path} holds no {file_name}; {extra_name} starts afresh")
                continue
            take_up.append(part.read_checkpoint_file(os.path.join(path, file_name), str(files[file_name])))
        for task, checkpoint in read:
            task.apply_checkpoint(checkpoint)
        for apply in take_up:
            apply()
        return robot["counters"]

    # -- internals ----------------------------------------------------------
    def _named_latest(self) -> Tuple[Optional[str], Optional[str]]:
        """The checkpoint name in ``latest`` when it names a checkpoint directory (one holding a robot
        file), and else why not (None when there is no ``latest`` file)."""
        path = os.path.join(self.directory, LATEST_FILE)
        if not os.path.lexists(path):
            return None, None
        try:
            raw = read_regular_file(path, MAX_LATEST_BYTES, "latest file")
        except FileCheckError as exc:
            return None, exc.reason
        try:
            named = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            return None, "not a checkpoint name (binary content)"
        if not _CHECKPOINT_DIR.fullmatch(named):
            return None, f"not a checkpoint name ({named[:40]!r})"
        if not has_robot(os.path.join(self.directory, named)):
            return None, f"names {named}, which is not a complete checkpoint"
        return named, None

    def _candidates(self) -> List[str]:
        """Checkpoint directories holding a robot file (complete, or damaged), the one ``latest``
        names first, then by step, highest first."""
        named, _ = self._named_latest()
        out = [os.path.join(self.directory, named)] if named else []
        for _, name in self._checkpoints():
            path = os.path.join(self.directory, name)
            if name != named and has_robot(path):
                out.append(path)
        return out

    def _legacy_checkpoints(self) -> List[str]:
        """Directories holding pickle task files of an earlier parl: this directory itself, or any
        of its subdirectories but the hidden ones (``ckpt-<step>``, or another name)."""
        try:
            names = sorted(os.listdir(self.directory), reverse=True)
        except OSError:
            return []
        paths = [self.directory] + [os.path.join(self.directory, n) for n in names if not n.startswith(".")]
        return [path for path in paths if _is_legacy(path)]

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


def best_checkpoints(directory: str) -> CheckpointManager:
    """The manager of the best evaluation's checkpoint of the run whose checkpoints are in ``directory``:
    ``<directory>/best``, one checkpoint kept (``ckpt-<step>`` of that evaluation, and its ``latest``)."""
    return CheckpointManager(os.path.join(directory, BEST), keep=1)


def _is_complete(path: str) -> bool:
    """Whether checkpoint ``path``'s robot file reads and its task files are there (not whether they
    are intact)."""
    try:
        robot = read_robot(path)
    except CheckpointError:
        return False
    return all(os.path.isfile(os.path.join(path, f)) for name in robot["tasks"] for f in _task_files(name))


def _is_legacy(path: str) -> bool:
    """Whether checkpoint directory ``path`` holds task files of the pickle format."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(n.endswith(LEGACY_SUFFIX) for n in names) and not any(n.endswith(ARRAYS_SUFFIX) for n in names)


def _legacy_message(path: str) -> str:
    return (
        f"{path} is a checkpoint of the old pickle format (<task>.ckpt) of an earlier parl; it is never "
        "unpickled, because unpickling a file can run any code in it; retrain, or carry trusted weights "
        "over as docs/checkpoints.md (Old pickle checkpoints) describes"
    )


def _task_files(task: str) -> List[str]:
    """The file names of task ``task``'s checkpoint."""
    meta = TASK_FILE.format(task=task)
    return [meta, arrays_path(meta)]


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reason(exc: OSError) -> str:
    """An OSError in a few words: its message and the file."""
    text = exc.strerror or str(exc)
    return f"{text} ({exc.filename})" if exc.filename else text


def check_writable(directory: str) -> None:
    """Make ``directory`` (and its parents) if needed and check a file can be created in it.

    Raises:
        NotWritableError: it cannot be made or written, naming it and why.
    """
    try:
        os.makedirs(directory, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}probe-", dir=directory)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise NotWritableError(f"{directory} is not writable: {_reason(exc)}") from None


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
