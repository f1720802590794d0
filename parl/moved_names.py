"""Names that moved keep working for one more minor version: one table of old names, one finder, one
warning, reported at the line of the code that used the old name.

    import parl.experiment.trainer          # DeprecationWarning: ... use parl.experiment.train.trainer
    import parl.framework.manager           # DeprecationWarning: ... use parl.runtime.manager
    from parl.utils import train_agents     # DeprecationWarning: ... use parl.experiment.train.trainer.Trainer
    __getattr__ = forward_names(["parl.experiment.config.robot_config"])   # in a package's __init__

Old module paths come in two kinds, both imported through the finder ``import parl`` puts first on
``sys.meta_path``:

- moved whole (:data:`MOVED_IN_0_2`, :func:`alias_modules`): the alias is the same module object as
  the new path (``sys.modules`` holds it under both names), so what a caller patches through the old
  path patches the module that runs;
- stood in for (:data:`PROXIED_MODULES`): the modules of ``parl.framework``, split in 0.1.0 into
  parl.core, parl.serving, parl.experience and parl.runtime, and ``parl.utils.training`` and
  ``parl.utils.cli``, whose functions live in :mod:`parl.compat`. The alias is a module of its own
  whose names are looked up in its new module, or where :data:`MOVED_NAMES` says they went; a name
  that is gone raises an AttributeError naming what does its job now (:data:`REMOVED_NAMES`).

Packages that lost a name (``parl``, ``parl.utils``, the examples' ``dqn_cartpole``) call
:func:`moved_attribute` from their module ``__getattr__``. docs/api.md lists every entry. Nothing is
imported until an old name is used: ``import parl`` pays only for the tables.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

#: The version that deprecated the names of the tables below.
DEPRECATED_IN = "0.2.0"


def removed_in(since: str) -> str:
    """The first version without a name deprecated in ``since``: the next minor version."""
    major, minor = since.split(".")[:2]
    return f"{major}.{int(minor) + 1}.0"


def deprecation_message(old: str, new: str, since: str) -> str:
    """``<old> is deprecated since parl <since> and will be removed in parl <next minor>: use <new>``."""
    return f"{old} is deprecated since parl {since} and will be removed in parl {removed_in(since)}: use {new}"


def deprecated(old: str, new: str, since: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated since parl ``since`` in favour of ``new``; ``stacklevel`` as
    :func:`warnings.warn`'s from here (3: the caller of this function's caller)."""
    warnings.warn(deprecation_message(old, new, since), DeprecationWarning, stacklevel=stacklevel)


#: An entry of PROXIED_MODULES and MOVED_NAMES: (the name to use now, as the warning says it; what old
#: code gets: a module path, or ``module:attribute``, empty for the new name itself, read as
#: ``module.attribute`` for a name and as a module path for a module). Plain tuples: constants that
#: cost ``import parl`` nothing to build.
Moved = Tuple[str, str]


#: Module paths of parl 0.1 that moved whole in 0.2 (old -> new). ``parl.experiment.config``,
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
    # pieces two placements share, out of a sibling placement's folder
    "parl.runtime.processes.error_data": "parl.runtime.error_data",
    "parl.runtime.cooperative.episodes": "parl.runtime.episodes",
    "parl.runtime.ray.session": "parl.runtime.ray_cluster.session",
    "parl.runtime.ray.address": "parl.runtime.ray_cluster.address",
    "parl.runtime.ray.local_cluster": "parl.runtime.ray_cluster.local_cluster",
}


#: Old module path -> its stand-in's new module (see the module docstring).
PROXIED_MODULES: Dict[str, Moved] = {
    "parl.framework": ("parl.core, parl.serving, parl.experience and parl.runtime", "parl"),
    "parl.framework.affinity": ("parl.affinity", ""),
    "parl.framework.agent": ("parl.core.agent", ""),
    "parl.framework.agent_helper": ("parl.core.agent_helper", ""),
    "parl.framework.algorithm": ("parl.core.algorithm", ""),
    "parl.framework.batch_info": ("parl.core.batch", "parl.core.legacy_learn"),
    "parl.framework.communicator": ("parl.serving.communicator", ""),
    "parl.framework.computation_task": ("parl.serving.computation_task", ""),
    "parl.framework.computation_wrapper": ("parl.serving.computation_wrapper", ""),
    "parl.framework.cooperative": ("parl.runtime.cooperative.runner", ""),
    "parl.framework.counters": ("parl.core.counters", ""),
    "parl.framework.distributions": ("parl.layers.distributions", ""),
    "parl.framework.errors": ("parl.core.errors", ""),
    "parl.framework.fast_predict": ("parl.core.algorithm", ""),
    "parl.framework.manager": ("parl.runtime.manager", ""),
    "parl.framework.model": ("parl.core.model", ""),
    "parl.framework.n_step": ("parl.experience.n_step", ""),
    "parl.framework.optimizer": ("parl.layers.optimizer", ""),
    "parl.framework.placement": ("parl.runtime.registry", ""),
    "parl.framework.prioritized_replay_buffer": ("parl.experience.prioritized_replay_buffer", ""),
    "parl.framework.replay_buffer": ("parl.experience.replay_buffer", ""),
    "parl.framework.request_queue": ("parl.serving.request_queue", ""),
    "parl.framework.shared_parts": ("parl.serving.shared_parts", ""),
    "parl.framework.shm_transport": ("parl.runtime.processes.shm_transport", ""),
    "parl.framework.specs": ("parl.core.specs", ""),
    "parl.framework.sum_tree": ("parl.experience.sum_tree", ""),
    "parl.framework.transforms": ("parl.serving.transforms", ""),
    "parl.framework.validation": ("parl.validation", ""),
    "parl.framework.worker_pool": ("parl.runtime.processes.worker_pool", ""),
    "parl.utils.training": ("parl.experiment.train.trainer", "parl.compat.training"),
    "parl.utils.cli": ("parl.experiment.train.launch", "parl.compat.example_cli"),
}

#: (old ``module.name``, new name, what old code gets or ""): the names that did not move with their
#: module, and those of modules that stayed.
_MOVED_NAMES: Tuple[Tuple[str, str, str], ...] = (
    ("parl.framework.agent.play_games", "parl.runtime.runner.play_games", ""),
    ("parl.framework.agent_helper.OnPolicyHelper", "parl.experience.helpers.OnPolicyHelper", ""),
    ("parl.framework.agent_helper.ExpReplayHelper", "parl.experience.helpers.ExpReplayHelper", ""),
    ("parl.framework.batch_info.BatchInfo", "parl.Transition", "parl.core.legacy_learn:BatchInfo"),
    ("parl.framework.batch_info.batch_info", "parl.Transition.to_tensors", "parl.core.legacy_learn:batch_info"),
    ("parl.framework.communicator.Communicator", "parl.serving.communicator.InProcessCommunicator", ""),
    ("parl.framework.computation_wrapper.PredictionTimer", "parl.serving.stats.PredictionTimer", ""),
    ("parl.framework.computation_wrapper.StatsSnapshot", "parl.serving.stats.StatsSnapshot", ""),
    ("parl.framework.computation_wrapper.WrapperStats", "parl.serving.stats.WrapperStats", ""),
    ("parl.framework.fast_predict.LayersNotBuilt", "parl.layers.LayersNotBuilt", ""),
    ("parl.framework.placement.AgentRunner", "parl.runtime.runner.AgentRunner", ""),
    ("parl.framework.placement.RunnerContext", "parl.runtime.runner.RunnerContext", ""),
    ("parl.framework.placement.ThreadRunner", "parl.runtime.threads.ThreadRunner", ""),
    ("parl.framework.worker_pool.WorkerFailure", "parl.runtime.error_data.WorkerFailure", ""),
    ("parl.utils.evaluate", "parl.experiment.evaluation.evaluate", ""),
    ("parl.utils.train_agents", "parl.experiment.train.trainer.Trainer", "parl.compat.training:train_agents"),
    ("parl.utils.train_until", "parl.experiment.train.trainer.Trainer", "parl.compat.training:train_until"),
    ("parl.utils.greedy_check", "parl.experiment.evaluation.confirmed_check", "parl.compat.training:greedy_check"),
    ("dqn_cartpole.EpsilonGreedyAgent", "parl.utils.EpsilonGreedyAgent", ""),
)
#: Old ``module.name`` -> its entry (new name, what old code gets).
MOVED_NAMES: Dict[str, Moved] = {old: (new, serve) for old, new, serve in _MOVED_NAMES}

#: Old ``module.name`` that no longer exists in any form -> what does its job now (for the error).
REMOVED_NAMES: Dict[str, str] = {
    "parl.framework.computation_task.BATCH_FIELDS": "the fields of parl.Transition",
    "parl.framework.fast_predict.compile_predictor": "parl.Algorithm.compile_predict",
    "parl.framework.placement.PLACEMENTS": "parl.runtime.registry.names()",
    "parl.framework.placement.check_placement": "parl.runtime.registry.entry",
    "parl.framework.specs.concatenate": "parl.core.batch.join",
}


def resolve(moved: Moved, is_module: bool) -> object:
    """The object old code gets for ``moved``: what it serves (else its new name) imported."""
    new, serve = moved
    target = serve or new
    if is_module:
        return importlib.import_module(target)
    module, sep, attribute = target.partition(":")
    if not sep:
        module, _, attribute = target.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def moved_attribute(module: str, name: str) -> object:
    """Attribute ``name`` of module ``module`` when it is a deprecated name (with its warning), for a
    module's ``__getattr__``: an entry of MOVED_NAMES, a stood-in submodule, or, in a stand-in, the
    attribute of its new module.

    Raises:
        AttributeError: ``module.name`` is none of these; the message names what replaced it when
            REMOVED_NAMES knows.
    """
    old = f"{module}.{name}"
    moved = MOVED_NAMES.get(old)
    if moved is not None:
        value = resolve(moved, is_module=False)
        if not _probed_by_from_import():
            warn_at_caller(old, moved[0])
        return value
    if old in PROXIED_MODULES:
        return importlib.import_module(old)  # the stand-in warns as it loads
    proxied = PROXIED_MODULES.get(module)
    if proxied is not None and not name.startswith("__"):
        try:
            return getattr(resolve(proxied, is_module=True), name)
        except AttributeError:
            pass
    where = f"module {module!r}" if proxied is None else f"module {module!r} (deprecated: {proxied[0]})"
    hint = REMOVED_NAMES.get(old)
    instead = f"; it was removed, use {hint}" if hint is not None else ""
    raise AttributeError(f"{where} has no attribute {name!r}{instead}")


def forward_names(modules: Sequence[str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` that finds a name it does not hold in the first of ``modules`` that
    has it (each imported on first use), so the package answers for the modules it holds."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for module in modules:
            try:
                return getattr(importlib.import_module(module), name)
            except AttributeError:
                continue
        raise AttributeError(f"none of the modules {list(modules)} has an attribute {name!r}")

    return __getattr__


def warn_at_caller(old: str, new: str, since: str = DEPRECATED_IN) -> None:
    """The DeprecationWarning of ``old``, reported at the line of the code that used it: the first
    frame outside the import machinery, this module and module ``__getattr__`` functions (so the
    default filters show it to a script)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and _is_machinery(frame):
        frame = frame.f_back
    module_globals = frame.f_globals
    warnings.warn_explicit(
        deprecation_message(old, new, since),
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<unknown>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )


_IMPORTLIB = os.path.dirname(importlib.__file__)


def _is_machinery(frame: types.FrameType) -> bool:
    """Whether ``frame`` is the import system's, this module's or a module ``__getattr__``."""
    filename = frame.f_code.co_filename
    return (
        filename == __file__
        or frame.f_code.co_name == "__getattr__"
        or filename.startswith(_IMPORTLIB)
        or filename.startswith("<frozen importlib")
    )


def _probed_by_from_import() -> bool:
    """Whether :func:`moved_attribute`'s caller was called by ``from <package> import <name>``'s
    first look (importlib's ``_handle_fromlist``), which the statement follows by a second read of
    the attribute: that one warns, so the statement warns once."""
    frame: Optional[types.FrameType] = sys._getframe(1)  # moved_attribute
    for _ in range(2):  # a module __getattr__, then its caller
        frame = frame.f_back if frame is not None else None
    return frame is not None and frame.f_code.co_name == "_handle_fromlist"


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new one."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(self.new)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module ran when its new path was imported."""


class _StandInLoader(importlib.abc.Loader):
    """Loads an old path of PROXIED_MODULES as a module of its own that serves its names by
    :func:`moved_attribute`."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None  # a plain module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        moved = PROXIED_MODULES[name]
        target = resolve(moved, is_module=True)
        assert isinstance(target, types.ModuleType)  # is_module: what import_module gave
        module.__doc__ = f"Deprecated stand-in for {moved[0]} (see docs/api.md)."

        def __getattr__(attribute: str) -> object:
            return moved_attribute(name, attribute)

        # The module's globals (ModuleType declares neither name as a settable attribute).
        vars(module).update(__all__=_public_names(name, target), __getattr__=__getattr__)
        warn_at_caller(name, moved[0])


class _MovedModules(importlib.abc.MetaPathFinder):
    """The finder of every old module path: moved whole (old -> (new path, version it moved in)) or
    stood in for (PROXIED_MODULES)."""

    def __init__(self) -> None:
        self.table: Dict[str, Tuple[str, str]] = {}

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[types.ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        moved = self.table.get(fullname)
        if moved is not None:
            new, since = moved
            warn_at_caller(fullname, new, since)
            return importlib.util.spec_from_loader(fullname, _AliasLoader(new))
        if fullname in PROXIED_MODULES:
            is_package = any(other.startswith(fullname + ".") for other in PROXIED_MODULES)
            return importlib.util.spec_from_loader(fullname, _STAND_IN, is_package=is_package)
        return None


_STAND_IN = _StandInLoader()
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


def _public_names(module: str, target: types.ModuleType) -> List[str]:
    """What ``from <old module> import *`` gives: the new module's public names and the names that
    moved elsewhere."""
    names = getattr(target, "__all__", None)
    if names is None:
        names = [n for n, v in vars(target).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    prefix = module + "."
    moved = [old[len(prefix) :] for old in MOVED_NAMES if old.startswith(prefix) and "." not in old[len(prefix) :]]
    return sorted(set(names) | set(moved))


alias_modules(MOVED_IN_0_2, since=DEPRECATED_IN)
