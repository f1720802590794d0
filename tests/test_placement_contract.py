"""The placement contract (parl.testing.PlacementContract) over every entry of :mod:`parl.runtime.registry`.

Each contract test runs once per placement case: one per registered placement, with its options from
``CASE_OPTIONS`` (its defaults without an entry), and the cooperative runner's pure-Python twins as a
case of their own. A new placement gets these tests by being registered. Behaviours of one placement
only are tested in its own file: test_wrapper.py (the wrapper's batching rules), test_cooperative.py
(the scheduler), test_workers.py (worker processes), test_ray.py, test_rlx_server.py.
"""

from __future__ import annotations

import parl
from parl.runtime import registry
from parl.testing import PlacementContract

from toys import WAIT, CountEnv, ReportingEchoAgent, echo_algorithm_func, placement_cases


class TestPlacementContract(PlacementContract):
    """Every registered placement (``cases`` left to its default)."""


def test_every_registered_placement_is_a_case_and_a_new_one_runs_with_its_defaults() -> None:
    assert [c.placement for c in placement_cases() if c.id == c.placement] == registry.names()
    registry.register("contract-check", "parl.runtime.threads:ThreadRunner", description="a test entry")
    try:
        (case,) = [c for c in placement_cases() if c.placement == "contract-check"]
        assert (case.id, dict(case.options), case.fixtures) == ("contract-check", {}, ())
        settings = parl.TaskSettings(echo_algorithm_func())
        manager = parl.Manager({"T": settings}, placement=case.placement_options(), thread_placement="os")
        manager.add_agent(ReportingEchoAgent(CountEnv(0), num_games=1), {"T": parl.OnPolicyHelper()})
        manager.start()
        assert [e["mismatches"] for e in manager.join(timeout=WAIT)] == [0]
    finally:
        registry.unregister("contract-check")
