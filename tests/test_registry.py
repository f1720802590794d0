"""The runtime registry: placements by name, their options, and how the Manager and the command
lines look them up."""

from __future__ import annotations

import pytest

import parl
from parl.experiment.train.launch import launch_parser
from parl.runtime import registry
from parl.runtime.threads import ThreadRunner

from toys import echo_algorithm_func


def settings() -> dict:
    return {"T": parl.TaskSettings(echo_algorithm_func())}


def test_the_built_in_placements_and_their_options() -> None:
    assert registry.names()[:3] == ["threads", "cooperative", "processes"]
    assert registry.entry("processes").options == ("workers", "restart_workers", "heartbeat_timeout")
    assert registry.entry("threads").options == ()
    assert registry.entry("threads").runner_class() is ThreadRunner


def test_an_unknown_placement_is_named_with_the_choices() -> None:
    with pytest.raises(ValueError, match="placement must be one of .*'threads'.*'cooperative'.*got 'fibers'"):
        parl.Manager(settings(), placement="fibers")


def test_an_option_the_placement_does_not_take_is_refused_naming_the_placements_that_do() -> None:
    with pytest.raises(
        ValueError, match="workers applies to placement 'processes' or 'ray' only, got placement 'threads'"
    ):
        parl.Manager(settings(), workers=2)
    with pytest.raises(ValueError, match="ray applies to placement 'ray' only, got placement 'processes'"):
        parl.Manager(settings(), placement="processes", ray=parl.RayOptions())
    with pytest.raises(ValueError, match="restart_workers applies to placement 'processes' only"):
        parl.Manager(settings(), placement="cooperative", restart_workers=True)
    with pytest.raises(ValueError, match="heartbeat_timeout applies to placement 'processes' only"):
        parl.Manager(settings(), heartbeat_timeout=5.0)


def test_a_registered_placement_is_used_by_the_manager_and_can_be_removed() -> None:
    registry.register("mine", "parl.runtime.threads:ThreadRunner", options=("workers",), description="test")
    try:
        assert "mine" in registry.names()
        with parl.Manager(settings(), placement="mine", workers=3, thread_placement="os") as manager:
            assert isinstance(manager._runner, ThreadRunner)
            assert manager._runner.context.options == {"workers": 3}
        with pytest.raises(ValueError, match="'mine' is already registered"):
            registry.register("mine", "parl.runtime.threads:ThreadRunner")
    finally:
        registry.unregister("mine")
    assert "mine" not in registry.names()
    with pytest.raises(ValueError, match="placement must be one of"):
        registry.unregister("mine")


@pytest.mark.parametrize("runner", ["parl.runtime.threads.ThreadRunner", "", ":ThreadRunner", 3])
def test_a_runner_must_be_named_module_colon_class(runner) -> None:
    with pytest.raises(ValueError, match="runner must be 'module:Class'"):
        registry.register("bad", runner)
    assert "bad" not in registry.names()


def test_a_runner_that_is_not_an_agent_runner_is_refused_when_used() -> None:
    registry.register("not-a-runner", "parl.runtime.registry:Placement")
    try:
        with pytest.raises(TypeError, match="is not an AgentRunner subclass"):
            parl.Manager(settings(), placement="not-a-runner")
    finally:
        registry.unregister("not-a-runner")


def test_examples_take_the_placement_on_the_command_line() -> None:
    parser = launch_parser("x", "robot.yaml")
    assert parser.parse_args([]).placement is None  # the config's
    assert parser.parse_args(["--placement", "cooperative"]).placement == "cooperative"
    with pytest.raises(SystemExit):
        parser.parse_args(["--placement", "fibers"])
