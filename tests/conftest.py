"""Fixtures shared by the tests: wrappers and managers that are always stopped, and a thread-leak check."""

from __future__ import annotations

from typing import List

import pytest

import parl

from toys import EchoAlgorithm, echo_algorithm_func, parl_threads


@pytest.fixture(autouse=True)
def no_parl_threads_left():
    """Every test must leave no parl-* thread running (wrappers, agents)."""
    yield
    leftover = parl_threads()
    for thread in leftover:
        thread.join(5.0)
    alive = [t.name for t in leftover if t.is_alive()]
    assert not alive, f"threads still running after the test: {alive}"


def _open_gates(task: parl.ComputationTask) -> None:
    if isinstance(task.algorithm, EchoAlgorithm):
        task.algorithm.gate.set()


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
        _open_gates(wrapper.task)
        wrapper.stop()


@pytest.fixture
def make_manager():
    """``make_manager(**task_settings)``: a Manager with one echo task "T", stopped after the test."""
    managers: List[parl.Manager] = []

    def make(**settings) -> parl.Manager:
        manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func(), **settings)}, thread_placement="os")
        managers.append(manager)
        return manager

    yield make
    for manager in managers:
        for task in manager.tasks.values():
            _open_gates(task)
        manager.stop()
