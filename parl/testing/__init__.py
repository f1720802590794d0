"""Contract tests that a user's own algorithm or placement joins in a few lines, from any repository,
under pytest.

    from parl.models import MLPQModel
    from parl.testing import AlgorithmCase, AlgorithmContract
    from my_algorithms import ExpectedSarsa

    class TestExpectedSarsa(AlgorithmContract):
        cases = [AlgorithmCase("ExpectedSarsa", ExpectedSarsa, MLPQModel, {"obs_dim": 4, "num_actions": 2})]

    from parl.runtime import registry
    from parl.testing import PlacementCase, PlacementContract

    registry.register("mine", "my_package.runner:MyRunner", options=MyOptions)   # MyOptions: a frozen dataclass

    class TestMyPlacement(PlacementContract):
        cases = [PlacementCase("mine", {"workers": 2})]

:class:`AlgorithmContract` (:mod:`parl.testing.algorithm_contract`) imports no pytest:
its tests are parametrized by the class's ``pytest_generate_tests`` hook. The placement
contract, :class:`PlacementContract` (:mod:`parl.testing.placement_contract`), needs
pytest's fixtures and so imports pytest; it is imported only when asked for
(``from parl.testing import PlacementContract``), as are ``in_process_predictions`` and the
``ray_cluster`` fixture. The robots the placement contract runs are echo tasks
(:mod:`parl.testing.echo`), watched with :mod:`parl.testing.watching`. ``import parl``
imports none of these.
"""

from typing import Any

from parl.testing.algorithm_contract import BAD_OPTIONS, AlgorithmCase, AlgorithmContract
from parl.testing.placement_cases import PlacementCase

__all__ = [
    "BAD_OPTIONS",
    "AlgorithmCase",
    "AlgorithmContract",
    "PlacementCase",
    "PlacementContract",
    "in_process_predictions",
    "ray_cluster",
]

_PLACEMENT_NAMES = ("PlacementContract", "in_process_predictions", "ray_cluster")


def __getattr__(name: str) -> Any:
    """The placement contract's names, imported on first use (they import pytest)."""
    if name in _PLACEMENT_NAMES:
        from parl.testing import placement_contract

        return getattr(placement_contract, name)
    raise AttributeError(f"module 'parl.testing' has no attribute {name!r}")
