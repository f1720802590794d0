"""The runtime registry: placements by name, their options, and how the Manager and the command
lines look them up."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import parl
from parl.experiment.train.launch import launch_parser
from parl.runtime import registry
from parl.runtime.rlx.settings import ServerSettings
from parl.runtime.threads import ThreadRunner
from parl.runtime.threads.options import ThreadsOptions

from toys import echo_algorithm_func


def settings() -> dict:
    return {"T": parl.TaskSettings(echo_algorithm_func())}


def test_the_built_in_placements_and_their_options() -> None:
    assert registry.names()[:3] == ["threads", "cooperative", "processes"]
    assert registry.entry("processes").options == (
        "workers",
        "restart_workers",
        "heartbeat_timeout",
        "asynchronous",
        "segments_in_flight",
        "max_staleness",
    )
    assert registry.entry("processes").options_type is parl.ProcessesOptions
    assert registry.entry("ray").options_type is parl.RayOptions
    assert registry.entry("threads").options == ()
    assert registry.entry("threads").runner_class() is ThreadRunner


def test_a_placement_is_chosen_by_its_name_or_its_options_which_reach_its_runner() -> None:
    options = parl.ProcessesOptions(workers=2, heartbeat_timeout=5.0)
    with parl.Manager(settings(), placement=options, thread_placement="os") as manager:
        assert manager.placement == "processes" and manager.placement_options is options
        assert manager.runner.context.options is options
        assert (manager.runner.workers, manager.runner.heartbeat_timeout) == (2, 5.0)
    with parl.Manager(settings(), placement="processes", thread_placement="os") as manager:
        assert manager.placement_options == parl.ProcessesOptions()
    with parl.Manager(settings(), thread_placement="os") as manager:
        assert (manager.placement, manager.placement_options) == ("threads", ThreadsOptions())
    with pytest.raises(ValueError, match="placement must be a placement's name or options, got dict"):
        parl.Manager(settings(), placement={"workers": 2})


def test_the_old_option_keywords_still_work_naming_the_new_form() -> None:
    with pytest.warns(DeprecationWarning, match=r"placement=ProcessesOptions\(workers=2, restart_workers=True\)"):
        manager = parl.Manager(settings(), placement="processes", workers=2, restart_workers=True)
    assert manager.placement_options == parl.ProcessesOptions(workers=2, restart_workers=True)
    with pytest.warns(DeprecationWarning, match=r"placement=RayOptions\(address='auto', workers=3\)"):
        manager = parl.Manager(settings(), placement="ray", workers=3, ray=parl.RayOptions(address="auto"))
    assert manager.placement_options == parl.RayOptions(address="auto", workers=3)
    with pytest.warns(DeprecationWarning, match=r"Manager\(rlx=...\) is deprecated"):
        manager = parl.Manager(settings(), placement="rlx", rlx=ServerSettings(bind="127.0.0.1:0"))
    assert manager.placement_options == ServerSettings(bind="127.0.0.1:0")


def test_each_entry_says_what_the_layers_above_ask_of_a_placement() -> None:
    ray, processes, threads, rlx = (registry.entry(n) for n in ("ray", "processes", "threads", "rlx"))
    assert ray.predicts_in_copies and not threads.predicts_in_copies
    assert ray.refuses == ("restart_agents",) and threads.refuses == ()
    assert rlx.remote_environments and not processes.remote_environments
    assert threads.reserve(ThreadsOptions()) == registry.Reservation(own_cpus=1.0)
    assert processes.reserve(parl.ProcessesOptions(workers=3)) == registry.Reservation(own_cpus=3.0)
    assert ray.reserve(parl.RayOptions(workers=2, worker_cpus=0.5)).actors == ({"CPU": 0.5}, {"CPU": 0.5})
    with pytest.raises(ValueError, match="workers must be set"):
        ray.reserve(parl.RayOptions())
    assert threads.remote_evaluation() is None and ray.remote_evaluation().__name__ == "RayEvaluation"
    assert rlx.config_keys()[:2] == ("bind", "token_file") and "token" not in rlx.config_keys()
    with pytest.raises(ValueError, match="restart_agents is not available with placement 'ray'"):
        parl.Manager(settings(), placement="ray", restart_agents=1)


@dataclass(frozen=True)
class NoDefaults:
    size: int


def test_an_entry_needs_options_with_defaults_and_known_features() -> None:
    with pytest.raises(ValueError, match="every field needs a default, got none for \\['size'\\]"):
        registry.register("bad", "parl.runtime.threads:ThreadRunner", options=NoDefaults)
    with pytest.raises(ValueError, match="options must be a dataclass type"):
        registry.register("bad", "parl.runtime.threads:ThreadRunner", options=dict)
    with pytest.raises(ValueError, match="refuses: unknown features \\['fibers'\\]"):
        registry.register("bad", "parl.runtime.threads:ThreadRunner", refuses=("fibers",))
    assert "bad" not in registry.names()
    with pytest.raises(ValueError, match="placement 'processes' takes no option 'worker'; its options are"):
        registry.entry("processes").make_options({"worker": 2})


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


def test_a_placement_registered_with_option_names_still_works_as_before() -> None:
    with pytest.warns(DeprecationWarning, match=r"registry.register\(..., options=<option names>\) is deprecated"):
        registry.register("mine", "parl.runtime.threads:ThreadRunner", options=("workers",), description="test")
    try:
        assert "mine" in registry.names()
        with pytest.warns(DeprecationWarning, match="Manager\\(workers=...\\) is deprecated"):
            manager = parl.Manager(settings(), placement="mine", workers=3, thread_placement="os")
        with manager:
            assert isinstance(manager._runner, ThreadRunner)
            assert manager._runner.context.options == {"workers": 3}
            assert manager._runner.context.options.get("workers") == 3
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
