"""The table of deprecated module paths and names, and the one mechanism that serves them.

    import parl.framework.manager        # parl.runtime.manager, with a DeprecationWarning naming it
    from parl.framework.agent_helper import OnPolicyHelper   # parl.experience.helpers.OnPolicyHelper
    parl.utils.train_agents              # parl.compat.training.train_agents, naming its replacement

:data:`MOVED_MODULES` maps an old module path to the module that now holds its names;
:data:`MOVED_NAMES` maps an old ``module.name`` to its new home, for the names that did not move
with their module (or whose module is not an alias). ``import parl`` puts a finder last on
``sys.meta_path`` that asks :func:`find_moved_module` about every ``parl.`` module no file holds;
an old module imports as an alias module whose attributes are looked up in its new module
(:func:`moved_attribute`). Packages that lost a name (``parl``, ``parl.utils``, the examples'
``dqn_cartpole``) call :func:`moved_attribute` from their module ``__getattr__``. Each old name
warns at the line that used it (:func:`warn_from_user_code`).
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
from dataclasses import dataclass
from typing import Dict, List, Optional

from parl.deprecation import deprecation_message


@dataclass(frozen=True)
class Moved:
    """Where an old name went.

    Attributes:
        new: the name to use now, as the warning says it.
        serve: what old code gets: a module path, or ``module:attribute``; empty: ``new`` itself
            (``new`` read as ``module.attribute`` for a name, as a module path for a module).
    """

    new: str
    serve: str = ""


#: Old module path -> its new module. Every module of ``parl.framework`` (split in 0.1.0 into
#: parl.core, parl.serving, parl.experience and parl.runtime) and the removed ``parl.utils`` modules.
MOVED_MODULES: Dict[str, Moved] = {
    "parl.framework": Moved("parl.core, parl.serving, parl.experience and parl.runtime", serve="parl"),
    "parl.framework.affinity": Moved("parl.affinity"),
    "parl.framework.agent": Moved("parl.core.agent"),
    "parl.framework.agent_helper": Moved("parl.core.agent_helper"),
    "parl.framework.algorithm": Moved("parl.core.algorithm"),
    "parl.framework.batch_info": Moved("parl.core.batch", serve="parl.core.legacy_learn"),
    "parl.framework.communicator": Moved("parl.serving.communicator"),
    "parl.framework.computation_task": Moved("parl.serving.computation_task"),
    "parl.framework.computation_wrapper": Moved("parl.serving.computation_wrapper"),
    "parl.framework.cooperative": Moved("parl.runtime.cooperative.runner"),
    "parl.framework.counters": Moved("parl.core.counters"),
    "parl.framework.distributions": Moved("parl.layers.distributions"),
    "parl.framework.errors": Moved("parl.core.errors"),
    "parl.framework.fast_predict": Moved("parl.core.algorithm"),
    "parl.framework.manager": Moved("parl.runtime.manager"),
    "parl.framework.model": Moved("parl.core.model"),
    "parl.framework.n_step": Moved("parl.experience.n_step"),
    "parl.framework.optimizer": Moved("parl.layers.optimizer"),
    "parl.framework.placement": Moved("parl.runtime.registry"),
    "parl.framework.prioritized_replay_buffer": Moved("parl.experience.prioritized_replay_buffer"),
    "parl.framework.replay_buffer": Moved("parl.experience.replay_buffer"),
    "parl.framework.request_queue": Moved("parl.serving.request_queue"),
    "parl.framework.shared_parts": Moved("parl.serving.shared_parts"),
    "parl.framework.shm_transport": Moved("parl.runtime.processes.shm_transport"),
    "parl.framework.specs": Moved("parl.core.specs"),
    "parl.framework.sum_tree": Moved("parl.experience.sum_tree"),
    "parl.framework.transforms": Moved("parl.serving.transforms"),
    "parl.framework.validation": Moved("parl.validation"),
    "parl.framework.worker_pool": Moved("parl.runtime.processes.worker_pool"),
    "parl.utils.training": Moved("parl.experiment.trainer", serve="parl.compat.training"),
    "parl.utils.cli": Moved("parl.experiment.launch", serve="parl.compat.example_cli"),
}

_TRAINER = "parl.experiment.trainer.Trainer"

#: Old ``module.name`` -> its new home, where it differs from its module's entry of MOVED_MODULES.
MOVED_NAMES: Dict[str, Moved] = {
    "parl.framework.agent.play_games": Moved("parl.runtime.runner.play_games"),
    "parl.framework.agent_helper.OnPolicyHelper": Moved("parl.experience.helpers.OnPolicyHelper"),
    "parl.framework.agent_helper.ExpReplayHelper": Moved("parl.experience.helpers.ExpReplayHelper"),
    "parl.framework.batch_info.BatchInfo": Moved("parl.Transition", serve="parl.core.legacy_learn:BatchInfo"),
    "parl.framework.batch_info.batch_info": Moved(
        "parl.Transition.to_tensors", serve="parl.core.legacy_learn:batch_info"
    ),
    "parl.framework.communicator.Communicator": Moved("parl.serving.communicator.InProcessCommunicator"),
    "parl.framework.computation_wrapper.PredictionTimer": Moved("parl.serving.stats.PredictionTimer"),
    "parl.framework.computation_wrapper.StatsSnapshot": Moved("parl.serving.stats.StatsSnapshot"),
    "parl.framework.computation_wrapper.WrapperStats": Moved("parl.serving.stats.WrapperStats"),
    "parl.framework.fast_predict.LayersNotBuilt": Moved("parl.layers.LayersNotBuilt"),
    "parl.framework.placement.AgentRunner": Moved("parl.runtime.runner.AgentRunner"),
    "parl.framework.placement.RunnerContext": Moved("parl.runtime.runner.RunnerContext"),
    "parl.framework.placement.ThreadRunner": Moved("parl.runtime.threads.ThreadRunner"),
    "parl.framework.worker_pool.WorkerFailure": Moved("parl.runtime.processes.error_data.WorkerFailure"),
    "parl.utils.train_agents": Moved(_TRAINER, serve="parl.compat.training:train_agents"),
    "parl.utils.train_until": Moved(_TRAINER, serve="parl.compat.training:train_until"),
    "parl.utils.greedy_check": Moved(
        "parl.utils.evaluation.confirmed_check", serve="parl.compat.training:greedy_check"
    ),
    "dqn_cartpole.EpsilonGreedyAgent": Moved("parl.utils.EpsilonGreedyAgent"),
}

#: Old ``module.name`` that no longer exists in any form -> what does its job now (for the error).
REMOVED_NAMES: Dict[str, str] = {
    "parl.framework.computation_task.BATCH_FIELDS": "the fields of parl.Transition",
    "parl.framework.fast_predict.compile_predictor": "parl.Algorithm.compile_predict",
    "parl.framework.placement.PLACEMENTS": "parl.runtime.registry.names()",
    "parl.framework.placement.check_placement": "parl.runtime.registry.entry",
    "parl.framework.specs.concatenate": "parl.core.batch.join",
}


def resolve(moved: Moved, is_module: bool) -> object:
    """The object old code gets for ``moved``: its ``serve`` (else ``new``) imported."""
    target = moved.serve or moved.new
    if is_module:
        return importlib.import_module(target)
    module, sep, attribute = target.partition(":")
    if not sep:
        module, _, attribute = target.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def moved_attribute(module: str, name: str) -> object:
    """Attribute ``name`` of module ``module`` when it is a deprecated name (with its warning), for a
    module's ``__getattr__``: an entry of MOVED_NAMES, a moved submodule, or, in an alias module, the
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
            warn_from_user_code(old, moved.new)
        return value
    if old in MOVED_MODULES:
        return importlib.import_module(old)  # the alias warns as it loads
    alias = MOVED_MODULES.get(module)
    if alias is not None and not name.startswith("__"):
        try:
            return getattr(resolve(alias, is_module=True), name)
        except AttributeError:
            pass
    where = f"module {module!r}" if alias is None else f"module {module!r} (deprecated: {alias.new})"
    hint = REMOVED_NAMES.get(old)
    instead = f"; it was removed, use {hint}" if hint is not None else ""
    raise AttributeError(f"{where} has no attribute {name!r}{instead}")


class _AliasLoader(importlib.abc.Loader):
    """Makes an old module an alias of its new one: warns, then serves attributes by moved_attribute."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None  # a plain module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        moved = MOVED_MODULES[name]
        target = resolve(moved, is_module=True)
        module.__doc__ = f"Deprecated alias of {moved.new} (see docs/api.md)."
        module.__all__ = _public_names(name, target)

        def __getattr__(attribute: str) -> object:
            return moved_attribute(name, attribute)

        module.__getattr__ = __getattr__
        warn_from_user_code(name, moved.new)


_LOADER = _AliasLoader()


def find_moved_module(fullname: str) -> Optional[importlib.machinery.ModuleSpec]:
    """The spec of the alias module for the old module path ``fullname``, or None when it is not one."""
    if fullname not in MOVED_MODULES:
        return None
    is_package = any(other.startswith(fullname + ".") for other in MOVED_MODULES)
    return importlib.util.spec_from_loader(fullname, _LOADER, is_package=is_package)


def warn_from_user_code(old: str, new: str) -> None:
    """The DeprecationWarning of ``old`` (:func:`parl.deprecation.deprecation_message`), reported at
    the line of the code that used it: the first frame outside the import machinery, this module and
    the module ``__getattr__`` functions that call it (so the default filters show it to a script)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and _is_machinery(frame):
        frame = frame.f_back
    module_globals = frame.f_globals
    warnings.warn_explicit(
        deprecation_message(old, new),
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<unknown>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )


def _probed_by_from_import() -> bool:
    """Whether :func:`moved_attribute`'s caller was called by ``from <package> import <name>``'s
    first look (importlib's ``_handle_fromlist``), which the statement follows by a second read of
    the attribute: that one warns, so the statement warns once."""
    frame: Optional[types.FrameType] = sys._getframe(1)  # moved_attribute
    for _ in range(2):  # a module __getattr__, then its caller
        frame = frame.f_back if frame is not None else None
    return frame is not None and frame.f_code.co_name == "_handle_fromlist"


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


def _public_names(module: str, target: types.ModuleType) -> List[str]:
    """What ``from <old module> import *`` gives: the new module's public names and the names that
    moved elsewhere."""
    names = getattr(target, "__all__", None)
    if names is None:
        names = [n for n, v in vars(target).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    prefix = module + "."
    moved = [old[len(prefix) :] for old in MOVED_NAMES if old.startswith(prefix) and "." not in old[len(prefix) :]]
    return sorted(set(names) | set(moved))
