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
(:mod:`parl.testing.echo`), watched with :mod:`parl.testing.watching`; its multi-agent robots play
the small PettingZoo environments of :mod:`parl.testing.multiagent_envs` (``ComingAndGoingEnv``,
``TurnTakingEnv``), imported on first use too (they import pettingzoo). ``import parl``
imports none of these.
"""

from typing import Any

from parl.testing.algorithm_contract import BAD_OPTIONS, AlgorithmCase, AlgorithmContract
from parl.testing.placement_cases import PlacementCase

__all__ = [
    "BAD_OPTIONS",
    "AlgorithmCase",
    "AlgorithmContract",
    "ComingAndGoingEnv",
    "PlacementCase",
    "PlacementContract",
    "in_process_predictions",
    "TurnTakingEnv",
    "ray_cluster",
]

#: Names imported on first use, by the module that holds them: the placement contract's (they import
#: pytest) and the multi-agent environments (they import pettingzoo).
_ON_FIRST_USE = {
    "PlacementContract": "placement_contract",
    "in_process_predictions": "placement_contract",
    "ray_cluster": "placement_contract",
    "ComingAndGoingEnv": "multiagent_envs",
    "TurnTakingEnv": "multiagent_envs",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`_ON_FIRST_USE`, imported on first use."""
    if name in _ON_FIRST_USE:
        import importlib

        return getattr(importlib.import_module(f"parl.testing.{_ON_FIRST_USE[name]}"), name)
    raise AttributeError(f"module 'parl.testing' has no attribute {name!r}")
