"""The robot file of a checkpoint (``ckpt-<step>/robot.json``): read within a bound and checked.

    robot = read_robot("runs/x/checkpoints/ckpt-0000020000")   # dict, or CheckpointError

It holds ``step`` (an int >= 0), ``tasks`` (the task names, plain file names), ``counters`` (a
mapping, checked by whoever restores them) and ``files`` (the SHA-256 of every task file by file
name; absent only in a checkpoint of the old pickle format, which the caller recognises).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from parl.serving.checkpoint_format import TASK_NAME, CheckpointError
from parl.serving.safe_files import FileCheckError, read_regular_file
from parl.validation import short_repr

#: The file that marks a checkpoint complete, and holds its counters.
ROBOT_FILE = "robot.json"
#: The largest robot file read (the counters of thousands of agents take well under 1 MiB).
MAX_ROBOT_BYTES = 16 << 20


def has_robot(path: str) -> bool:
    """Whether checkpoint directory ``path`` holds an entry named :data:`ROBOT_FILE` (of any kind)."""
    return os.path.lexists(os.path.join(path, ROBOT_FILE))


def read_robot(path: str) -> Dict[str, Any]:
    """The robot file of checkpoint directory ``path``, parsed and checked as the module says.

    Raises:
        CheckpointError: it is missing, not a regular file, larger than :data:`MAX_ROBOT_BYTES`, not
            JSON, or of another structure; one line naming it.
    """
    file_path = os.path.join(path, ROBOT_FILE)
    try:
        robot = json.loads(read_regular_file(file_path, MAX_ROBOT_BYTES, "robot file").decode("utf-8"))
    except FileCheckError as exc:
        raise CheckpointError(str(exc)) from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested beyond the parser
        raise CheckpointError(f"{file_path}: not JSON (truncated or damaged?)") from None
    problem = robot_problem(robot)
    if problem is not None:
        raise CheckpointError(f"{file_path}: {problem}")
    return robot


def robot_problem(robot: object) -> Optional[str]:
    """What is wrong with the parsed robot file ``robot``, in a few words (None when nothing is)."""
    if not isinstance(robot, dict):
        return f"holds {type(robot).__name__}, not a mapping"
    step = robot.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return f"step {short_repr(step)} is not an integer >= 0"
    tasks = robot.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, str) and TASK_NAME.fullmatch(t) for t in tasks):
        return f"tasks {short_repr(tasks)} is not a list of task names"
    if len(set(tasks)) != len(tasks):
        return f"tasks {short_repr(tasks)} names a task twice"
    if not isinstance(robot.get("counters"), dict):
        return f"counters {short_repr(robot.get('counters'))} is not a mapping"
    files = robot.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return f"files {short_repr(files)} is not a mapping of file names to SHA-256 hashes"
    return None
