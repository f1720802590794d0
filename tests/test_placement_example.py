"""A placement added as a user adds one (tests/placement_example/: one folder, one ``register`` call) runs
through ``parl.Manager``, through a YAML config's ``placement:`` block as ``parl train`` reads it, and
through the placement contract, with nothing outside its folder naming it."""

from __future__ import annotations

import json
from pathlib import Path

import placement_example
import pytest
from placement_example import CappedThreadsOptions
from placement_example.runner import CappedThreadRunner

import parl
from parl.experiment.cli import main
from parl.experiment.config import ConfigError, load_config
from parl.runtime import registry
from parl.testing import PlacementCase, PlacementContract
from parl.testing.robots import cartpole_a2c_config
from parl.testing.robots import write_config as write_config_file

from toys import WAIT, CountEnv, ReportingEchoAgent, echo_algorithm_func


class TestCappedThreads(PlacementContract):
    cases = [PlacementCase("capped-threads", {"max_agents": 64})]


def test_its_register_call_made_it_an_entry_with_its_own_options() -> None:
    entry = registry.entry("capped-threads")
    assert entry.options_type is placement_example.CappedThreadsOptions and entry.options == ("max_agents",)
    assert entry.runner_class() is CappedThreadRunner and "capped-threads" in registry.names()


def manager_of(agents: int, placement: object) -> parl.Manager:
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement=placement, thread_placement="os")
    for code in range(agents):
        manager.add_agent(ReportingEchoAgent(CountEnv(code), num_games=2), {"T": parl.OnPolicyHelper()})
    return manager


def test_its_options_reach_its_runner_through_the_manager() -> None:
    manager = manager_of(2, CappedThreadsOptions(max_agents=2))
    assert isinstance(manager.runner, CappedThreadRunner) and manager.runner.options.max_agents == 2
    manager.start()
    assert len(manager.join(timeout=WAIT)) == 4 and manager.errors == []
    capped = manager_of(3, CappedThreadsOptions(max_agents=2))
    with pytest.raises(ValueError, match="starts at most max_agents=2 agents, got 3"):
        capped.start()
    capped.stop()
    assert manager_of(3, "capped-threads").placement_options == CappedThreadsOptions()
    with pytest.raises(ValueError, match="max_agents must be an integer >= 1, got 0"):
        CappedThreadsOptions(max_agents=0)


def write_config(tmp_path: Path, placement: object) -> str:
    """A two-agent CartPole robot of 300 env steps in ``placement`` (a config's placement block), as YAML."""
    config = cartpole_a2c_config(agents=2, max_env_steps=300)
    return str(write_config_file(tmp_path / "capped.yaml", config, {"placement": placement}, log_dir=tmp_path / "run"))


def test_its_options_reach_its_runner_through_a_configs_placement_block_as_parl_train_reads_it(
    tmp_path: Path, capsys
) -> None:
    path = write_config(tmp_path, {"name": "capped-threads", "max_agents": 2})
    assert load_config(path).placement.options == CappedThreadsOptions(max_agents=2)
    assert main(["train", path, "--quiet"]) == 0
    assert json.loads((tmp_path / "run" / "result.json").read_text())["env_steps"] >= 300
    capped = write_config(tmp_path, {"name": "capped-threads", "max_agents": 1})
    assert main(["train", capped, "--quiet"]) == 1
    assert "starts at most max_agents=1 agents, got 2" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="^placement.max_agents: expected an integer >= 1, got 0$"):
        load_config(write_config(tmp_path, {"name": "capped-threads", "max_agents": 0}))
    with pytest.raises(ConfigError, match="^placement.max_agent: unknown key for placement 'capped-threads'; did you"):
        load_config(write_config(tmp_path, {"name": "capped-threads", "max_agent": 2}))
