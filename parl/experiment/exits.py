"""Which user code called ``sys.exit`` while ``parl`` loaded a config or built a robot, in one line.

    try:
        config = load_config(path)
    except SystemExit as exc:
        print(f"parl train: {describe_exit(exc)}")
        # tasks.RL.model: my_models.Model called sys.exit(0) while being built

The exit's traceback tells what was being loaded: the innermost class spec being
built (:func:`parl.experiment.class_spec.build_checked` and ``ClassSpec.build``),
module being imported for a config's class path
(:func:`parl.experiment.class_spec.import_object`) or environment factory being
called (:class:`parl.experiment.config.EnvConfig`); elsewhere, the file, line and
function that exited.
"""

from __future__ import annotations

import traceback
from types import FrameType
from typing import Optional

from parl.experiment import class_spec
from parl.experiment.config import EnvConfig


def exit_call(exc: SystemExit) -> str:
    """The call that raised ``exc``: ``sys.exit()``, ``sys.exit(3)``, ``sys.exit('no GPU')``."""
    return "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"


def describe_exit(exc: SystemExit) -> str:
    """One line naming what called ``sys.exit``: ``tasks.RL.model: my_models.Model called sys.exit(0)
    while being built``, ``agent.class: importing 'my_agents' called sys.exit(3)``, ``env.factory:
    my_envs.make called sys.exit(1) while being built``, or ``/path/file.py:12 (run_one_episode)
    called sys.exit(0)``."""
    call = exit_call(exc)
    frames = list(traceback.walk_tb(exc.__traceback__))
    for frame, _ in reversed(frames):  # the innermost first
        loading = _loading(frame)
        if loading is not None:
            return loading.format(call=call)
    if not frames:
        return f"{call} was called"
    frame, line = frames[-1]
    return f"{frame.f_code.co_filename}:{line} ({frame.f_code.co_name}) called {call}"


def _loading(frame: FrameType) -> Optional[str]:
    """What ``frame`` was loading, as a template with ``{call}``; None for other frames."""
    code, names = frame.f_code, frame.f_locals
    if code is class_spec._build.__code__:
        spec = names["spec"]
        return f"{spec.key_path}: {spec.import_path} called {{call}} while being built"
    if code is class_spec.import_object.__code__ and "module_name" in names:
        return f"{names['key_path']}: importing {names['module_name']!r} called {{call}}"
    env = names.get("self")
    if isinstance(env, EnvConfig):
        made = f"env.factory: {env.factory}" if env.factory is not None else f"env.id: {env.id}"
        return f"{made} called {{call}} while being built"
    return None
