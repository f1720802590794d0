"""Names that moved keep working: an old module path imports the module at its new path, with a
:class:`DeprecationWarning` naming the new one; a package forwards the names of a module it holds.

    alias_modules({"parl.experiment.trainer": "parl.experiment.train.trainer"}, since="0.2.0")
    import parl.experiment.trainer          # DeprecationWarning: ... use parl.experiment.train.trainer
    __getattr__ = forward_names("parl.experiment.config.robot_config")   # in a package's __init__

The alias is the same module object as the new path (``sys.modules`` holds it under both names), so
what a caller patches through the old path patches the module that runs. Nothing is imported until an
old path is: ``import parl`` pays only for the table.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple


def deprecated(old: str, new: str, since: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated since parl ``since`` in favour of ``new``."""
    warnings.warn(
        f"{old} is deprecated since parl {since} and will be removed in a later minor version: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new one."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran when its new path was imported."""


class _MovedModules(importlib.abc.MetaPathFinder):
    """The finder of every old module path: old path -> (new path, version it moved in)."""

    def __init__(self) -> None:
        self.table: Dict[str, Tuple[str, str]] = {}

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        moved = self.table.get(fullname)
        if moved is None:
            return None
        new, since = moved
        # stacklevel 3: the importing line (warnings skips the import machinery's own frames)
        deprecated(fullname, new, since, stacklevel=3)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


_FINDER = _MovedModules()


def alias_modules(table: Mapping[str, str], since: str) -> None:
    """Make each old module path of ``table`` (old -> new) import its new one, warning once per import.

    Raises:
        ValueError: an old path is also a new one in ``table`` (a circle).
    """
    circular = sorted(set(table) & set(table.values()))
    if circular:
        raise ValueError(f"moved module paths may not also be new paths: {circular}")
    _FINDER.table.update({old: (new, since) for old, new in table.items()})
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def forward_names(module: str) -> Callable[[str], Any]:
    """A package's ``__getattr__`` that finds a name it does not hold in ``module`` (imported on first
    use), so the package answers for the module it holds."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(importlib.import_module(module), name)
        except AttributeError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None

    return __getattr__


#: Module paths of parl 0.1 that moved in 0.2 (old -> new). ``parl.experiment.config``,
#: ``parl.experiment.cli`` and ``parl.experiment.evaluation`` are rooms now and forward the old
#: modules' names themselves.
MOVED_IN_0_2 = {
    "parl.experiment.class_spec": "parl.experiment.config.class_spec",
    "parl.experiment.yaml_loading": "parl.experiment.config.yaml_loading",
    "parl.experiment.env_spaces": "parl.experiment.config.env_spaces",
    "parl.experiment.build": "parl.experiment.config.build",
    "parl.experiment.trainer": "parl.experiment.train.trainer",
    "parl.experiment.callbacks": "parl.experiment.config.callbacks",
    "parl.experiment.checkpoints": "parl.experiment.train.checkpoints",
    "parl.experiment.metrics": "parl.experiment.train.metrics",
    "parl.experiment.progress": "parl.experiment.train.progress",
    "parl.experiment.run_counters": "parl.experiment.train.run_counters",
    "parl.experiment.run_log": "parl.experiment.train.run_log",
    "parl.experiment.robot_file": "parl.experiment.train.robot_file",
    "parl.experiment.stop_signals": "parl.experiment.train.stop_signals",
    "parl.experiment.snapshot": "parl.experiment.train.snapshot",
    "parl.experiment.run": "parl.experiment.train.run",
    "parl.experiment.launch": "parl.experiment.train.launch",
    "parl.experiment.evaluation_start": "parl.experiment.config.evaluation_start",
    "parl.experiment.remote_evaluation": "parl.experiment.evaluation.remote",
    "parl.experiment.video": "parl.experiment.evaluation.video",
    "parl.experiment.sweep": "parl.experiment.runs.sweep",
    "parl.experiment.tune": "parl.experiment.runs.tune",
    "parl.experiment.tune_log": "parl.experiment.runs.tune_log",
    "parl.experiment.seed_runs": "parl.experiment.runs.seed_runs",
    "parl.experiment.aggregate": "parl.experiment.runs.aggregate",
    "parl.experiment.statistics": "parl.experiment.runs.statistics",
    "parl.experiment.child_processes": "parl.experiment.runs.child_processes",
    "parl.experiment.options": "parl.experiment.runs.options",
    "parl.experiment.plot": "parl.experiment.runs.plot",
    "parl.experiment.export": "parl.experiment.policy.export",
    "parl.experiment.import_guard": "parl.experiment.policy.import_guard",
    "parl.experiment.serve_process": "parl.experiment.cli.serve_process",
    "parl.experiment.core_claims": "parl.core_claims",
    "parl.experiment.safe_files": "parl.serving.safe_files",
    "parl.utils.evaluation": "parl.experiment.evaluation.greedy",
}

alias_modules(MOVED_IN_0_2, since="0.2.0")
