"""Fixtures shared by the tests: wrappers and managers that are always stopped, a thread-leak check,
and the placement cases every placement-contract test runs over."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterator, List

import pytest

import parl
from parl.runtime.rlx.settings import ServerSettings
from parl.testing.placement_contract import (  # noqa: F401 - ray_cluster: the session's Ray cluster fixture
    parametrize_cases,
    prepare_case,
    ray_cluster,
    robots_of,
)

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


def with_batching(settings: Dict[str, Any]) -> Dict[str, Any]:
    """``settings`` with the fields of :class:`parl.Batching` among them gathered into ``batching``."""
    batching = {f.name for f in dataclasses.fields(parl.Batching)}
    rest = {key: value for key, value in settings.items() if key not in batching}
    rest["batching"] = parl.Batching(**{key: value for key, value in settings.items() if key in batching})
    return rest


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
        wrapper = parl.ComputationWrapper(task, **with_batching(kwargs))
        wrapper.start()
        wrappers.append(wrapper)
        return wrapper

    yield make
    for wrapper in wrappers:
        open_gates(wrapper.task)
        wrapper.stop()


@pytest.fixture
def make_manager():
    """``make_manager(tasks=("T",), placement="threads", **task_settings)``: a Manager of echo tasks in
    ``placement`` (a name or a placement's options), stopped after the test (gates opened first), which
    must then not be running."""
    managers: List[parl.Manager] = []

    def make(tasks=("T",), placement: object = "threads", **settings) -> parl.Manager:
        manager = parl.Manager(
            {name: parl.TaskSettings(echo_algorithm_func(), **with_batching(settings)) for name in tasks},
            placement=placement,
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
    """``rlx_server(slots=2, games=None, task=None, **settings) -> (manager, "host:port")``: a started RLX
    echo robot (tests/toys.py: rlx_manager; ``task``: its TaskSettings' keywords) on a free loopback
    port with ServerSettings ``settings``; stopped after the test."""
    managers: List[parl.Manager] = []

    def make(slots: int = 2, games=None, task=None, **settings) -> tuple:
        server = ServerSettings(**{"bind": "127.0.0.1:0", **settings})
        manager = rlx_manager(slots, server, games, **(task or {}))
        managers.append(manager)
        manager.start()
        return manager, rlx_address(manager)

    yield make
    for manager in managers:
        manager.stop()


# -- placement cases (parl.testing): tests of this repository that run over every placement -------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test function that takes ``placement_case`` (or ``robot``) runs once per placement case
    (parl.testing's parametrize_cases); a test class with a hook of its own (PlacementContract) is
    left to it."""
    if metafunc.cls is not None and hasattr(metafunc.cls, "pytest_generate_tests"):
        return
    parametrize_cases(metafunc, placement_cases())


@pytest.fixture
def placement_case(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> PlacementCase:
    """The placement case of this test run, prepared (placement "ray" on the session's cluster)."""
    return prepare_case(request, monkeypatch)


@pytest.fixture
def robot(placement_case: PlacementCase) -> Iterator[Robots]:
    """``robot(tasks=("T",), ...)``: a Manager of echo tasks in the placement case's placement; every
    Manager is stopped after the test, which must leave no thread or process behind."""
    yield from robots_of(placement_case)


# -- running the suite in two processes (`make test`: pytest -n 2 --dist loadgroup) ------------------------

#: Test files whose every test starts or joins a Ray cluster (or Ray Tune) or runs `parl` with one.
RAY_FILES = {"test_ray.py", "test_tune.py", "test_testing_package.py"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long: a long learning check, run by `make test-long` rather than `make test`")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """With pytest-xdist, the tests that use Ray run in two groups, each in one worker process, one test
    after another: the tests of the Ray files, and the Ray cases of the other files (each group's worker
    starts the session's local cluster once, so two clusters run side by side, on ports of their own). The
    other tests are spread over the workers."""
    for item in items:
        if item.path.name in RAY_FILES:
            item.add_marker(pytest.mark.xdist_group("ray-files"))
        elif "ray" in item.name.lower().replace("array", ""):
            item.add_marker(pytest.mark.xdist_group("ray-cases"))
