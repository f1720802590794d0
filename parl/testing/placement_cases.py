"""Placement cases: the ways of running a robot that the placement contract runs over, and the robots
it makes of echo tasks (:mod:`parl.testing.echo`) in each.

A case names an entry of :mod:`parl.runtime.registry` with the options it needs in tests.
:func:`placement_cases` gives one for every registered entry (and a variant or two of some); a
placement of your own is a case as soon as it is registered, or a ``PlacementCase("mine", options)``
you list yourself. This module imports no pytest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import parl
from parl.runtime import registry
from parl.serving.computation_wrapper import Batching
from parl.testing.echo import EchoAlgorithm, echo_algorithm_func
from parl.testing.watching import child_pids, parl_threads

#: Options the built-in placements need in tests (fields of their options types), made on use; a
#: placement without an entry runs with its defaults. RLX: any free loopback port, as tests in other
#: sessions may listen beside it (the contract runs the runner with agents of their own
#: environments; its network side is the RLX tests' own).
CASE_OPTIONS: Dict[str, Callable[[], Dict[str, object]]] = {
    "processes": lambda: {"workers": 2},
    "ray": lambda: {"workers": 2},
    "rlx": lambda: {"bind": "127.0.0.1:0"},
}

#: Fixtures a built-in placement's cases request before they run (placement "ray": the session's
#: cluster, :func:`parl.testing.ray_cluster`).
CASE_FIXTURES: Dict[str, Tuple[str, ...]] = {"ray": ("ray_cluster",)}


def _python_twins(monkeypatch: Any) -> None:
    """Cooperative runners made from now on run the Python twins of the C extension's pieces."""
    from parl.runtime.cooperative import runner

    monkeypatch.setattr(runner, "EXTENSION", None)


#: Variants of a placement that keep the contract too, as (case suffix, setup): the cooperative
#: runner's Python twins, which stand in for its C extension where that was not built.
VARIANTS: Dict[str, Sequence[Tuple[str, Callable[[Any], None]]]] = {
    "cooperative": [("python", _python_twins)],
}


@dataclass(frozen=True)
class PlacementCase:
    """One way of running a robot under the placement contract.

    Attributes:
        placement: the name of its :mod:`parl.runtime.registry` entry.
        options: the placement's options its robots get: option name -> value, the fields of the
            entry's options type (``{"workers": 2}``); the others keep their defaults.
        id: the test id; the placement's name when empty.
        prepare: called with pytest's ``monkeypatch`` before the test makes its robots (None: nothing).
        fixtures: names of pytest fixtures the case needs set up first (``"ray_cluster"`` for Ray).
    """

    placement: str
    options: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""
    prepare: Optional[Callable[[Any], None]] = None
    fixtures: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.placement, str) or not self.placement:
            raise ValueError(f"PlacementCase: placement must be a registered placement's name, got {self.placement!r}")
        if not self.id:
            object.__setattr__(self, "id", self.placement)

    def placement_options(self, extra: Mapping[str, Any] = {}) -> object:  # noqa: B006 - read only
        """What ``parl.Manager(placement=...)`` takes for this case: the placement's options, made of
        :attr:`options`, ``extra`` and the defaults.

        Raises:
            ValueError: an unknown placement, or an option it does not take.
        """
        return registry.entry(self.placement).make_options({**self.options, **extra})

    def takes_option(self, name: str) -> bool:
        """Whether the case's placement has an option ``name``."""
        return name in registry.option_names(registry.entry(self.placement).options_type)


def placement_cases() -> List[PlacementCase]:
    """A case for every entry of :mod:`parl.runtime.registry`, in registration order, each followed
    by its VARIANTS; options from CASE_OPTIONS, fixtures from CASE_FIXTURES."""
    cases = []
    for name in registry.names():
        options = CASE_OPTIONS.get(name, dict)()
        fixtures = CASE_FIXTURES.get(name, ())
        cases.append(PlacementCase(name, options, fixtures=fixtures))
        cases.extend(
            PlacementCase(name, options, id=f"{name}-{suffix}", prepare=prepare, fixtures=fixtures)
            for suffix, prepare in VARIANTS.get(name, ())
        )
    return cases


def open_gates(task: parl.ComputationTask) -> None:
    """Let every computation held by ``task``'s echo algorithm go on (for teardown)."""
    if isinstance(task.algorithm, EchoAlgorithm):
        task.algorithm.gate.set()


class Robots:
    """Makes Managers of echo tasks in one placement case and tells what they left running."""

    def __init__(self, case: PlacementCase) -> None:
        self.case = case
        self.managers: List[parl.Manager] = []
        self._children_before = child_pids()

    def __call__(
        self,
        tasks: Sequence[str] = ("T",),
        *,
        max_batchsize: Optional[int] = None,
        min_batchsize: Optional[int] = None,
        training_timeout: Optional[float] = None,
        normalize_inputs: bool = False,
        restart_agents: int = 0,
        options: Optional[Mapping[str, Any]] = None,
    ) -> parl.Manager:
        """A Manager with one echo task per name of ``tasks``, each with these TaskSettings (None:
        TaskSettings' default), restarting failed agents ``restart_agents`` times, its placement's
        options the case's with ``options`` besides (None: none)."""
        given: Dict[str, Any] = dict(
            max_batchsize=max_batchsize, min_batchsize=min_batchsize, training_timeout=training_timeout
        )
        batching = Batching(**{name: value for name, value in given.items() if value is not None})
        manager = parl.Manager(
            {
                name: parl.TaskSettings(echo_algorithm_func(), batching=batching, normalize_inputs=normalize_inputs)
                for name in tasks
            },
            placement=self.case.placement_options(options or {}),
            thread_placement="os",
            restart_agents=restart_agents,
        )
        self.managers.append(manager)
        return manager

    def leftovers(self) -> List[str]:
        """The parl threads still running and the child processes started since this object was made."""
        children = sorted(child_pids() - self._children_before)
        return [t.name for t in parl_threads()] + [f"child process {pid}" for pid in children]

    def close(self) -> None:
        """Stop every Manager made (their algorithms' gates opened first)."""
        for manager in self.managers:
            for task in manager.tasks.values():
                open_gates(task)
            manager.stop()
