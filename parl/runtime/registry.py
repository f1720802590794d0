"""The runtime registry: placements by name, each an AgentRunner with an options type of its own.

    manager = parl.Manager(tasks, placement="cooperative")                   # by name: its default options
    manager = parl.Manager(tasks, placement=ProcessesOptions(workers=4))     # by its options
    registry.register("mine", "my_package.runner:MyRunner", options=MyOptions)   # a placement of your own

An entry names its runner class as ``"module:Class"``, imported on first use (so
``import parl`` imports no greenlet, multiprocessing or network machinery), and
its options type: a frozen dataclass whose fields all have defaults and whose
``__post_init__`` checks them (a :class:`~parl.validation.ParameterError`
naming the field). The Manager finds the entry by the options' type and hands
them to the runner (:attr:`RunnerContext.options`) without reading a field; a
robot config's ``placement:`` block is the entry's ``name`` and its options.
Besides, an entry says what the layers above ask of a placement, so that none
of them names one (see :class:`Placement`): whether its agents predict through
copies of the tasks, whether their environments are remote, which Manager
features it refuses, what a sweep reserves per trial, where evaluation runs,
and whether it can run here at all.

A placement is a folder (or module) that holds its runner and options type and
calls :func:`register` once; the built-in ones (:data:`BUILT_IN`: threads,
cooperative, processes, ray, rlx, each in its folder of :mod:`parl.runtime`,
registering in its ``placement`` module) are loaded on the first look-up. The
placement contract (:class:`parl.testing.PlacementContract`) runs over every
registered entry in parl's tests, and over a placement of your own in yours.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Type, Union

from parl.moved_names import DEPRECATED_IN, deprecated
from parl.runtime.named_options import named_options_type
from parl.runtime.runner import AgentRunner, RunnerContext

#: The built-in placements, in registration order: the module of each that calls :func:`register`.
BUILT_IN = (
    "parl.runtime.threads.placement",
    "parl.runtime.cooperative.placement",
    "parl.runtime.processes.placement",
    "parl.runtime.ray.placement",
    "parl.runtime.rlx.placement",
)

#: The placement of a Manager (and of a config) that names none.
DEFAULT = "threads"

#: Manager features a placement may refuse (:attr:`Placement.refuses`).
FEATURES = ("restart_agents",)

#: :func:`register` with option names, the form before options types (deprecated), and its successor.
OLD_REGISTER = "registry.register(..., options=<option names>)"
NEW_REGISTER = "registry.register(..., options=<an options type>)"


@dataclass(frozen=True)
class Reservation:
    """The CPUs a sweep reserves for one trial of a placement.

    Attributes:
        own_cpus: for the trial's own process (its agents, when they run there).
        actors: one bundle (resource name -> amount) per actor the trial starts elsewhere.
    """

    own_cpus: float = 1.0
    actors: Tuple[Mapping[str, float], ...] = ()


class ConfigForm(Protocol):
    """What a placement's ``config_options`` type makes of a config's ``placement:`` block."""

    def options(self) -> object:
        """The options the placement's runner gets."""


def one_cpu(options: object) -> Reservation:
    """The reservation of a placement whose agents run in the trial's own process: one CPU."""
    return Reservation()


def always_available() -> None:
    """The availability check of a placement that needs nothing beyond parl's own dependencies."""


@dataclass(frozen=True)
class Placement:
    """One registry entry.

    Attributes:
        name: what ``Manager(placement=...)`` and configs call it.
        runner: ``"module:Class"`` of its AgentRunner subclass.
        options_type: its options: a frozen dataclass, every field with a default, checked when made.
        description: one line for help texts.
        predicts_in_copies: its agents act through copies of the tasks elsewhere (placement "ray"),
            so the Manager's own tasks answer no prediction (their wrappers' counters still count
            the copies' predictions).
        remote_environments: its agents' environments are remote (placement "rlx": clients that
            connect over the network): ``Manager.environment`` gives a stand-in for each, a restarted
            agent keeps its own, and ``parl serve`` runs a robot in the first such placement.
        refuses: the Manager features (of :data:`FEATURES`) it does not take.
        config_options: the type a config's ``placement:`` block is read as when its keys differ from
            the options type's (a token file for the token itself): a frozen dataclass whose
            ``options()`` gives the options; None: the options type itself.
        reserve: the CPUs a sweep reserves per trial, given the options (:class:`Reservation`);
            raises a ParameterError naming an option it needs set.
        evaluation: ``"module:Class"`` of the
            :class:`~parl.runtime.remote_evaluation.RemoteEvaluation` that plays a run's evaluations
            elsewhere (placement "ray": an actor); None: evaluations run in the driver.
        available: raises ImportError, saying what to install, when the placement cannot run here.
    """

    name: str
    runner: str
    options_type: type
    description: str = ""
    predicts_in_copies: bool = False
    remote_environments: bool = False
    refuses: Tuple[str, ...] = ()
    config_options: Optional[type] = None
    reserve: Callable[[Any], Reservation] = one_cpu
    evaluation: Optional[str] = None
    available: Callable[[], None] = always_available

    @property
    def options(self) -> Tuple[str, ...]:
        """The names of its options (the fields of :attr:`options_type`)."""
        return option_names(self.options_type)

    def runner_class(self) -> Type[AgentRunner]:
        """The runner class, imported now."""
        cls = _import(self.runner)
        if not (isinstance(cls, type) and issubclass(cls, AgentRunner)):
            raise TypeError(f"placement {self.name!r}: {self.runner} is not an AgentRunner subclass")
        return cls

    def make_options(self, values: Mapping[str, object]) -> object:
        """Its options with ``values`` (option name -> value) and the defaults.

        Raises:
            ValueError: an option it does not take (naming it and its options), or a bad value (a
                ParameterError naming the option).
        """
        return _checked_make(self.options_type, values, self.name)

    def config_keys(self) -> Tuple[str, ...]:
        """The keys of a config's ``placement:`` block besides ``name``."""
        return option_names(self.config_options or self.options_type)

    def read_config(self, values: Mapping[str, object]) -> Tuple[object, object]:
        """``(config form, options)`` of a config's ``placement:`` block, less its ``name``: the config form
        is what the block's keys give (with every default, written back by a resolved config), the
        options what the runner gets (the same object unless :attr:`config_options` is set).

        Raises:
            ValueError: as :meth:`make_options`.
        """
        if self.config_options is None:
            options = self.make_options(values)
            return options, options
        form: ConfigForm = _checked_make(self.config_options, values, self.name)
        return form, form.options()

    def remote_evaluation(self) -> Optional[type]:
        """The :attr:`evaluation` class, imported now (None: evaluations run in the driver)."""
        return None if self.evaluation is None else _import(self.evaluation)


_ENTRIES: Dict[str, Placement] = {}
_loaded = False  # whether the BUILT_IN modules were imported (or are being imported)


def register(
    name: str,
    runner: str,
    *,
    options: Union[type, Sequence[str], None] = None,
    description: str = "",
    predicts_in_copies: bool = False,
    remote_environments: bool = False,
    refuses: Sequence[str] = (),
    config_options: Optional[type] = None,
    reserve: Callable[[Any], Reservation] = one_cpu,
    evaluation: Optional[str] = None,
    available: Callable[[], None] = always_available,
) -> None:
    """Add placement ``name`` run by ``runner`` (``"module:Class"``) with ``options`` (its options type;
    None: it takes none); the other arguments are the :class:`Placement` attributes of the same names.
    A sequence of option names for ``options`` is the form before options types (deprecated): the
    runner then gets a read-only mapping of the options set.

    Raises:
        ValueError: ``name`` is taken or empty, ``runner`` is not of the form ``"module:Class"``,
            ``options`` (or ``config_options``) is not a dataclass with a default for every field, or
            ``refuses`` names a feature not in :data:`FEATURES`.
    """
    _load_built_ins()
    if not isinstance(name, str) or not name:
        raise ValueError(f"placement name must be a non-empty string, got {name!r}")
    if name in _ENTRIES:
        raise ValueError(f"placement {name!r} is already registered ({_ENTRIES[name].runner})")
    module, colon, cls = runner.partition(":") if isinstance(runner, str) else ("", "", "")
    if not (module and colon and cls):
        raise ValueError(f"runner must be 'module:Class', got {runner!r}")
    if options is None:
        options = named_options_type(name, ())
    elif not isinstance(options, type):
        deprecated(OLD_REGISTER, NEW_REGISTER, DEPRECATED_IN)
        options = named_options_type(name, tuple(options))
    for kind in (options, config_options):
        if kind is not None:
            _check_options_type(kind)
    unknown = sorted(set(refuses) - set(FEATURES))
    if unknown:
        raise ValueError(f"refuses: unknown features {unknown}; features are {list(FEATURES)}")
    _ENTRIES[name] = Placement(
        name,
        runner,
        options,
        description,
        bool(predicts_in_copies),
        bool(remote_environments),
        tuple(refuses),
        config_options,
        reserve,
        evaluation,
        available,
    )


def unregister(name: str) -> None:
    """Remove placement ``name`` (for tests and plugins that registered one).

    Raises:
        ValueError: no such placement.
    """
    entry(name)
    del _ENTRIES[name]


def names() -> List[str]:
    """Every registered placement, the built-in ones first, in registration order."""
    _load_built_ins()
    return list(_ENTRIES)


def entry(name: object) -> Placement:
    """The entry of placement ``name``.

    Raises:
        ValueError: naming the value and the choices.
    """
    _load_built_ins()
    if not isinstance(name, str) or name not in _ENTRIES:
        raise ValueError(f"placement must be one of {names()}, got {name!r}")
    return _ENTRIES[name]


def entry_of(options: object) -> Placement:
    """The entry whose options type ``options`` is an instance of.

    Raises:
        ValueError: no entry takes options of that type.
    """
    _load_built_ins()
    for candidate in _ENTRIES.values():
        if type(options) is candidate.options_type:
            return candidate
    raise ValueError(
        f"placement must be a placement's name or options, got {type(options).__name__} {options!r}; "
        f"placements are {names()}"
    )


def taking(option: str) -> List[str]:
    """The placements that take an option named ``option``, in registration order."""
    return [e.name for e in _ENTRIES.values() if option in e.options]


def placement_and_options(placement: object) -> Tuple[Placement, object]:
    """The entry and options of ``placement``: a placement's name (with its default options) or an
    instance of an entry's options type.

    Raises:
        ValueError: an unknown placement, or options of no entry's type.
    """
    if isinstance(placement, str):
        chosen = entry(placement)
        return chosen, chosen.make_options({})
    return entry_of(placement), placement


def is_options(value: object) -> bool:
    """Whether ``value`` is an instance of a registered placement's options type."""
    return any(type(value) is e.options_type for e in _ENTRIES.values())


def option_names(kind: type) -> Tuple[str, ...]:
    """The options of options type ``kind``: its fields that its constructor takes."""
    return tuple(f.name for f in dataclasses.fields(kind) if f.init)


def option_values(options: object) -> Dict[str, object]:
    """Option name -> value of every option of ``options`` (an options instance)."""
    return {name: getattr(options, name) for name in option_names(type(options))}


def make_runner(name: str, context: RunnerContext) -> AgentRunner:
    """A runner of placement ``name`` for ``context`` (whose ``options`` are the placement's).

    Raises:
        ValueError: an unknown placement.
    """
    return entry(name).runner_class()(context)


def _load_built_ins() -> None:
    """Import every module of :data:`BUILT_IN` once (each registers its placement)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILT_IN:
        importlib.import_module(module)


def _import(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _check_options_type(kind: type) -> None:
    if not dataclasses.is_dataclass(kind):
        raise ValueError(f"options must be a dataclass type, got {kind!r}")
    bare = [
        f.name
        for f in dataclasses.fields(kind)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if bare:
        raise ValueError(f"options {kind.__name__}: every field needs a default, got none for {bare}")


def _checked_make(kind: type, values: Mapping[str, object], placement: str) -> Any:
    known = list(option_names(kind))
    unknown = [key for key in values if key not in known]
    if unknown:
        takes = f"its options are {known}" if known else "it takes none"
        raise ValueError(f"placement {placement!r} takes no option {unknown[0]!r}; {takes}")
    return kind(**values)
