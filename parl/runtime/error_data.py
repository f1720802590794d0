"""Exceptions as plain data, for a process boundary that must not run code when read.

    data = error_data(exc)        # in the worker: type, args, plain attributes, repr (parl.wire crosses it)
    exc = rebuild_error(data)     # in the parent: an instance of the same class, or a WorkerFailure
    data = describe_agent_error(agent_error)       # an AgentError the same way, with its traceback text
    agent_error = rebuild_agent_error(agent_id, episode, data)

The parent never imports a module and never runs a class's Python code to
rebuild an exception: the class is looked up among the modules it has already
imported (``sys.modules``), must be a ``BaseException`` subclass, and the
instance is made by the nearest built-in exception base's ``__new__`` and
``__init__`` with the sent arguments (so ``SystemExit(0).code`` and
``OSError.errno`` are set), then given the sent plain attributes. A class that
cannot be found (defined inside a function, say) or arguments that are not
plain data give a :class:`WorkerFailure` carrying the exception's ``repr``.
"""

from __future__ import annotations

import builtins
import sys
from types import ModuleType
from typing import Dict, Mapping, Optional, Type, cast

from parl import wire
from parl.core.errors import AgentError


class WorkerFailure(RuntimeError):
    """Stands for an agent's exception that could not be rebuilt in the parent as it was."""


def error_data(exc: BaseException) -> Dict[str, object]:
    """``exc`` as plain data: its class's module and qualified name, its args and plain attributes
    (those :mod:`parl.wire` carries; the args as the message when they are not), and its repr."""
    args: object = list(exc.args)
    if not _crosses(args):
        args = [str(exc)]
    attributes = {
        name: value
        for name, value in vars(exc).items()
        if isinstance(name, str) and not name.startswith("__") and _crosses(value)
    }
    cls = type(exc)
    return {
        "module": cls.__module__,
        "qualname": cls.__qualname__,
        "args": args,
        "attributes": attributes,
        "repr": repr(exc),
    }


def rebuild_error(data: Mapping[str, object]) -> BaseException:
    """The exception :func:`error_data` described, rebuilt without running code of the sender's
    choosing (see the module docstring); a :class:`WorkerFailure` when that cannot be done."""
    cls = _find_class(data.get("module"), data.get("qualname"))
    args, attributes = data.get("args"), data.get("attributes")
    if cls is None or not isinstance(args, list) or not isinstance(attributes, dict):
        return WorkerFailure(str(data.get("repr")))
    base = cast(Type[BaseException], next(c for c in cls.__mro__ if c.__module__ == "builtins"))
    try:
        exc: BaseException = base.__new__(cls, *args)
        base.__init__(exc, *args)
    except Exception:  # noqa: BLE001 - arguments the built-in base refuses
        return WorkerFailure(str(data.get("repr")))
    for name, value in attributes.items():
        if isinstance(name, str) and name.isidentifier() and not name.startswith("__"):
            try:
                exc.__dict__[name] = value
            except AttributeError:  # a class without a __dict__
                break
    return exc


def _find_class(module: object, qualname: object) -> Optional[type]:
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    found: object = builtins if module == "builtins" else sys.modules.get(module)
    for part in qualname.split("."):
        if not (isinstance(found, (type, ModuleType)) and part.isidentifier()):
            return None
        found = vars(found).get(part)  # a dict read: no module __getattr__, no descriptor runs
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _crosses(value: object) -> bool:
    try:
        wire.pack(value)
    except ValueError:
        return False
    return True


def describe_agent_error(error: AgentError) -> Dict[str, object]:
    """An agent's error as plain data another process can rebuild with :func:`rebuild_agent_error`."""
    return {
        "original": error_data(error.original),
        "description": error.description,
        "where": error.where,
        "traceback": error.traceback_text,
        "restart": error.restart,
    }


def rebuild_agent_error(agent_id: int, episode: int, described: Mapping[str, object]) -> AgentError:
    """An AgentError built from another process's description, with the worker's traceback.

    Raises:
        ValueError: ``described`` is not what :func:`describe_agent_error` makes.
    """
    original = described.get("original")
    description, traceback_text, where = (described.get(key) for key in ("description", "traceback", "where"))
    if not (isinstance(original, dict) and isinstance(description, str) and isinstance(traceback_text, str)) or not (
        where is None or isinstance(where, str)
    ):
        raise ValueError(f"an error message of agent {agent_id} has fields of the wrong types")
    restart = described.get("restart", 0)
    if type(restart) is not int or restart < 0:
        raise ValueError(f"an error message of agent {agent_id} has restart {restart!r}")
    exc = rebuild_error(original)
    error = AgentError(
        agent_id, episode, exc, where=where, traceback_text=traceback_text, description=description, restart=restart
    )
    error.args = (f"agent {agent_id} failed in episode {episode}: {original.get('repr')}\n{error.traceback_text}",)
    return error
