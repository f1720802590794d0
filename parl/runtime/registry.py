"""The runtime registry: placements by name, each an :class:`~parl.runtime.runner.AgentRunner`.

    manager = parl.Manager(tasks, placement="cooperative")        # looked up here
    registry.register("mine", "my_package.runner:MyRunner", options=("workers",))
    manager = parl.Manager(tasks, placement="mine", workers=4)

An entry names its runner class as ``"module:Class"``, imported on first use
(so ``import parl`` does not import greenlet or multiprocessing machinery),
and the options it accepts; the Manager refuses an option the placement does
not take. The placement contract (:class:`parl.testing.PlacementContract`) runs
over every registered entry in parl's tests, and over a placement of your own
in yours.

Built in:

- ``"threads"``: one OS thread per agent (:mod:`parl.runtime.threads`).
- ``"cooperative"``: every agent a greenlet in one scheduler thread (:mod:`parl.runtime.cooperative`).
- ``"processes"``: agents in forked worker processes, predictions through shared memory
  (:mod:`parl.runtime.processes`); options ``workers``, ``restart_workers`` and ``heartbeat_timeout``.
- ``"ray"``: agents on Ray worker actors, each acting with copies of the tasks; the learners stay in
  this process (:mod:`parl.runtime.ray`); options ``workers`` and ``ray``.
- ``"rlx"``: environments in other processes, machines or languages connect over TCP, one agent per
  connection, batched by the cooperative scheduler (:mod:`parl.runtime.rlx`); option ``rlx``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Tuple, Type

from parl.runtime.runner import AgentRunner, RunnerContext


@dataclass(frozen=True)
class Placement:
    """One registry entry.

    Attributes:
        name: what ``Manager(placement=...)`` and configs call it.
        runner: ``"module:Class"`` of its AgentRunner subclass.
        options: the Manager options it takes besides the common ones.
        description: one line for help texts.
        predicts_in_copies: its agents act through copies of the tasks elsewhere (placement "ray"),
            so the Manager's own tasks answer no prediction (their wrappers' counters still count
            the copies' predictions).
    """

    name: str
    runner: str
    options: Tuple[str, ...]
    description: str
    predicts_in_copies: bool = False

    def runner_class(self) -> Type[AgentRunner]:
        """The runner class, imported now."""
        module, _, name = self.runner.partition(":")
        cls = getattr(importlib.import_module(module), name)
        if not (isinstance(cls, type) and issubclass(cls, AgentRunner)):
            raise TypeError(f"placement {self.name!r}: {self.runner} is not an AgentRunner subclass")
        return cls


_ENTRIES: Dict[str, Placement] = {}


def register(
    name: str,
    runner: str,
    *,
    options: Sequence[str] = (),
    description: str = "",
    predicts_in_copies: bool = False,
) -> None:
    """Add placement ``name`` run by ``runner`` (``"module:Class"``), taking the Manager ``options`` listed
    (``predicts_in_copies``: see :class:`Placement`).

    Raises:
        ValueError: ``name`` is taken or empty, or ``runner`` is not of the form ``"module:Class"``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"placement name must be a non-empty string, got {name!r}")
    if name in _ENTRIES:
        raise ValueError(f"placement {name!r} is already registered ({_ENTRIES[name].runner})")
    module, colon, cls = runner.partition(":") if isinstance(runner, str) else ("", "", "")
    if not (module and colon and cls):
        raise ValueError(f"runner must be 'module:Class', got {runner!r}")
    _ENTRIES[name] = Placement(name, runner, tuple(options), description, bool(predicts_in_copies))


def unregister(name: str) -> None:
    """Remove placement ``name`` (for tests and plugins that registered one).

    Raises:
        ValueError: no such placement.
    """
    entry(name)
    del _ENTRIES[name]


def names() -> List[str]:
    """Every registered placement, in registration order."""
    return list(_ENTRIES)


def entry(name: object) -> Placement:
    """The entry of placement ``name``.

    Raises:
        ValueError: naming the value and the choices.
    """
    if not isinstance(name, str) or name not in _ENTRIES:
        raise ValueError(f"placement must be one of {names()}, got {name!r}")
    return _ENTRIES[name]


def check_options(name: str, options: Mapping[str, object]) -> None:
    """Refuse the options (set ones: not None) that placement ``name`` does not take.

    Raises:
        ValueError: naming the first such option and the placements that take it.
    """
    accepted = entry(name).options
    for option, value in options.items():
        if value is not None and option not in accepted:
            takers = [e.name for e in _ENTRIES.values() if option in e.options]
            raise ValueError(
                f"{option} applies to placement {' or '.join(map(repr, takers))} only, got placement {name!r}"
            )


def make_runner(name: str, context: RunnerContext) -> AgentRunner:
    """A runner of placement ``name`` for ``context`` (whose options were checked by :func:`check_options`).

    Raises:
        ValueError: an unknown placement.
    """
    return entry(name).runner_class()(context)


register("threads", "parl.runtime.threads:ThreadRunner", description="one OS thread per agent")
register(
    "cooperative",
    "parl.runtime.cooperative.runner:CooperativeRunner",
    description="every agent a greenlet in one scheduler thread that batches their predictions",
)
register(
    "processes",
    "parl.runtime.processes.worker_pool:ProcessRunner",
    options=("workers", "restart_workers", "heartbeat_timeout"),
    description="agents in forked worker processes; predictions cross through shared memory",
)
register(
    "ray",
    "parl.runtime.ray.runner:RayRunner",
    options=("workers", "ray"),
    description="agents on Ray worker actors acting with copies of the tasks; learners in this process",
    predicts_in_copies=True,
)
register(
    "rlx",
    "parl.runtime.rlx.runner:RlxRunner",
    options=("rlx",),
    description="remote environments connect over TCP (the RLX protocol); the cooperative scheduler batches them",
)
