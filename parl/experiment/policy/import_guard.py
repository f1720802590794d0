"""Importing the classes a file names when the file may come from someone else (an exported policy):
nothing is imported from the working directory or the file's own directory unless the caller lists
it, and a standard-library module is refused before it is imported (importing one can have side
effects, and none holds a model or an algorithm).

    with guarded_imports(python_path=["~/my_models"], refused=[policy_dir]):
        check_importable("my_models.Net", "policy.json: tasks.RL.model.class")
        ...                                   # then import it as usual (resolve_spec)
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import site
import sys
import sysconfig
from typing import Iterator, List, Sequence

from parl.experiment.config.class_spec import ConfigError


@contextlib.contextmanager
def guarded_imports(python_path: Sequence[str], refused: Sequence[str]) -> Iterator[None]:
    """Within the block, ``sys.path`` is ``python_path`` (made absolute) followed by the usual entries
    less the working directory (``''`` and ``.`` too) and the ``refused`` directories. Modules
    imported in the block stay imported."""
    banned = {os.path.realpath(p) for p in (os.getcwd(), *refused)}
    saved = list(sys.path)
    kept = [p for p in saved if p not in ("", ".") and os.path.realpath(p) not in banned]
    sys.path[:] = [os.path.abspath(os.path.expanduser(p)) for p in python_path] + kept
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved


def check_importable(import_path: object, key_path: str) -> None:
    """Refuse, before importing anything, an import path whose top module is missing or belongs to
    the standard library. Other problems are left to the import itself.

    Raises:
        ConfigError: one line naming ``key_path`` and the module.
    """
    if not isinstance(import_path, str) or not all(part.isidentifier() for part in import_path.split(".")):
        return  # import_object says what is wrong with it
    top = import_path.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)  # finds the module's file, runs none of its code
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"{key_path}: cannot import {import_path!r}: {exc}") from None
    if spec is None:
        raise ConfigError(
            f"{key_path}: cannot import {import_path!r}: no module named {top!r} (outside the working and "
            "policy directories; pass python_path=[...] to load from a directory of your own)"
        )
    if _in_standard_library(spec):
        raise ConfigError(
            f"{key_path}: {import_path!r} is in the standard library's {top!r}, which holds no model or "
            "algorithm; refused before importing it"
        )


def _in_standard_library(spec: importlib.machinery.ModuleSpec) -> bool:
    if spec.origin in ("built-in", "frozen"):
        return True
    locations: List[str] = [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
    if not locations:
        return False
    paths = sysconfig.get_paths()
    stdlib = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib") if key in paths}
    packages = {os.path.realpath(p) for p in _site_directories()}
    for location in locations:
        real = os.path.realpath(location)
        if any(_under(real, p) for p in packages):
            return False
        if any(_under(real, p) for p in stdlib):
            return True
    return False


def _site_directories() -> List[str]:
    paths = sysconfig.get_paths()
    found = [paths[key] for key in ("purelib", "platlib") if key in paths]
    try:
        found += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # some embedded interpreters' site module lacks these
        pass
    return found


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)
