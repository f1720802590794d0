"""Contract tests that a user's own algorithm joins in a few lines, from any repository, under pytest.

    from parl.models import MLPQModel
    from parl.testing import AlgorithmCase, AlgorithmContract
    from my_algorithms import ExpectedSarsa

    class TestExpectedSarsa(AlgorithmContract):
        cases = [AlgorithmCase("ExpectedSarsa", ExpectedSarsa, MLPQModel, {"obs_dim": 4, "num_actions": 2})]

:class:`AlgorithmContract` (:mod:`parl.testing.algorithm_contract`) imports no pytest:
its tests are parametrized by the class's ``pytest_generate_tests`` hook. The placement
contract, :class:`PlacementContract` (:mod:`parl.testing.placement_contract`), needs
pytest's fixtures and so imports pytest; it is imported only when asked for
(``from parl.testing import PlacementContract``). ``import parl`` imports neither.
"""

from typing import Any

from parl.testing.algorithm_contract import BAD_OPTIONS, AlgorithmCase, AlgorithmContract

__all__ = ["BAD_OPTIONS", "AlgorithmCase", "AlgorithmContract", "PlacementCase", "PlacementContract"]

_PLACEMENT_NAMES = ("PlacementCase", "PlacementContract")


def __getattr__(name: str) -> Any:
    """The placement contract's names, imported on first use (they import pytest)."""
    if name in _PLACEMENT_NAMES:
        from parl.testing import placement_contract

        return getattr(placement_contract, name)
    raise AttributeError(f"module 'parl.testing' has no attribute {name!r}")
