"""Fixtures shared by the tests: wrappers and managers that are always stopped, a thread-leak check,
and the placement cases every placement-contract test runs over."""

from __future__ import annotations

from typing import List

import pytest

import parl
from parl.runtime import registry
from parl.runtime.rlx.settings import ServerSettings

from toys import (
    EchoAlgorithm,
    PlacementCase,
    Robots,
    echo_algorithm_func,
    open_gates,
    parl_threads,
    placement_cases,
    rlx_address,
    rlx_manager,
)


@pytest.fixture(autouse=True)
def no_parl_threads_left():
    """Every test must leave no parl-* thread running (wrappers, agents)."""
    yield
    leftover = parl_threads()
    for thread in leftover:
        thread.join(5.0)
    alive = [t.name for t in leftover if t.is_alive()]
    assert not alive, f"threads still running after the test: {alive}"


@pytest.fixture
def make_wrapper():
    """``make_wrapper(algorithm=None, **wrapper_kwargs)``: a started wrapper around an echo task.

    Every wrapper made is stopped after the test (its algorithm's gate opened first).
    """
    wrappers: List[parl.ComputationWrapper] = []

    def make(algorithm=None, **kwargs) -> parl.ComputationWrapper:
        task = parl.ComputationTask("T", algorithm if algorithm is not None else EchoAlgorithm())
        wrapper = parl.ComputationWrapper(task, **kwargs)
        wrapper.start()
        wrappers.append(wrapper)
        return wrapper

    yield make
    for wrapper in wrappers:
        open_gates(wrapper.task)
        wrapper.stop()


@pytest.fixture
def make_manager():
    """``make_manager(tasks=("T",), placement="threads", workers=None, restart_workers=False,
    **task_settings)``: a Manager of echo tasks, stopped after the test (gates opened first), which
    must then not be running."""
    managers: List[parl.Manager] = []

    def make(
        tasks=("T",), placement: str = "threads", workers=None, restart_workers: bool = False, **settings
    ) -> parl.Manager:
        manager = parl.Manager(
            {name: parl.TaskSettings(echo_algorithm_func(), **settings) for name in tasks},
            placement=placement,
            workers=workers,
            restart_workers=restart_workers,
            thread_placement="os",
        )
        managers.append(manager)
        return manager

    yield make
    for manager in managers:
        for task in manager.tasks.values():
            open_gates(task)
        manager.stop()
        assert not manager.running()


@pytest.fixture
def rlx_server():
    """``rlx_server(slots=2, games=None, **settings) -> (manager, "host:port")``: a started RLX echo
    robot (tests/toys.py: rlx_manager) on a free loopback port with ServerSettings ``settings``;
    stopped after the test."""
    managers: List[parl.Manager] = []

    def make(slots: int = 2, games=None, **settings) -> tuple:
        manager = rlx_manager(slots, ServerSettings(**{"bind": "127.0.0.1:0", **settings}), games)
        managers.append(manager)
        manager.start()
        return manager, rlx_address(manager)

    yield make
    for manager in managers:
        manager.stop()


# -- placement cases (tests/toys.py) ----------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``placement_case`` (or ``robot``) runs once per placement case; one marked
    ``in_process_predictions`` (it watches predictions inside the Manager's own tasks and wrappers)
    runs over the placements whose agents predict through those tasks only."""
    if "placement_case" in metafunc.fixturenames:
        cases = placement_cases()
        if metafunc.definition.get_closest_marker("in_process_predictions"):
            cases = [case for case in cases if not registry.entry(case.placement).predicts_in_copies]
        metafunc.parametrize("placement_case", cases, ids=[case.id for case in cases], indirect=True)


@pytest.fixture
def placement_case(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> PlacementCase:
    """The placement case of this test run, prepared (placement "ray" on the session's cluster)."""
    case: PlacementCase = request.param
    if case.placement == "ray":
        request.getfixturevalue("ray_cluster")
    case.prepare(monkeypatch)
    return case


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster on 127.0.0.1, joined by this process: a head and two more nodes of one CPU
    each, started once per test session by the first test that needs it and shut down at the end
    (every process of it is this session's; nothing else is stopped)."""
    from parl.runtime.ray.session import import_ray

    ray = import_ray()  # sets the environment that keeps a local Ray on the loopback address
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, configure_logging=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def robot(placement_case: PlacementCase):
    """``robot(tasks=("T",), **task_settings)``: a Manager of echo tasks in the placement case's
    placement; every Manager is stopped after the test, which must leave no thread or process behind."""
    robots = Robots(placement_case)
    yield robots
    robots.close()
    assert robots.leftovers() == []
