"""Multi-agent environments: PolicyMapping, several helpers of one task per agent, PettingZooAgent's
Parallel and AEC episodes (agents leaving and entering, turns, global state, per-task statistics), configs
of PettingZoo environments, and a multi-agent run through ``parl train``, ``eval``, resume and ``export``.
The placement contract (test_placement_contract.py) runs multi-agent robots in every placement."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import yaml

import parl
from parl.experiment.cli.commands import main
from parl.experiment.config.class_spec import ConfigError
from parl.experiment.config.robot_config import load_config
from parl.multiagent import PettingZooAgent, PolicyMapping
from parl.testing import ComingAndGoingEnv, TurnTakingEnv
from parl.testing.echo import OBS_SPECS, EchoAlgorithm, EchoModel

# -- PolicyMapping -------------------------------------------------------------------------------------


def test_a_policy_mapping_is_shared_per_agent_or_by_pattern_first_match_first() -> None:
    ids = ["adversary_0", "agent_0", "agent_1"]
    assert PolicyMapping("RL").tasks_of(ids, ["RL"]) == dict.fromkeys(ids, "RL")
    per_agent = PolicyMapping({"adversary_0": "red", "agent_0": "blue", "agent_1": "green"})
    assert per_agent.tasks_of(ids, ["red", "blue", "green"]) == {
        "adversary_0": "red",
        "agent_0": "blue",
        "agent_1": "green",
    }
    by_pattern = PolicyMapping({"agent_1": "green", "adversary_*": "red", "*": "blue"})
    assert by_pattern.tasks_of(ids, ["red", "blue", "green"]) == {
        "adversary_0": "red",
        "agent_0": "blue",
        "agent_1": "green",
    }
    assert PolicyMapping({"*": "blue", "agent_1": "green"}).task_of("agent_1") == "blue"  # the first match wins
    assert PolicyMapping(by_pattern) == by_pattern


def test_a_policy_mapping_names_an_unmatched_agent_an_unknown_task_and_a_malformed_rule() -> None:
    with pytest.raises(ValueError, match=r"agent 'agent_0' matches none of the patterns \['adversary_\*'\]"):
        PolicyMapping({"adversary_*": "red"}).task_of("agent_0")
    with pytest.raises(ValueError, match=r"agent 'agent_0' is mapped to task 'blue'; tasks are \['red'\]"):
        PolicyMapping("blue").tasks_of(["agent_0"], ["red"])
    with pytest.raises(ValueError, match="expected at least one pattern"):
        PolicyMapping({})
    with pytest.raises(ValueError, match="expected a non-empty task name, got 3"):
        PolicyMapping({"*": 3})  # type: ignore[dict-item]


# -- several helpers of one task --------------------------------------------------------------------------


class Recorder(parl.OnPolicyHelper):
    """An on-policy helper that logs, into a list it shares, its predictions and stored transitions."""

    def __init__(self, log: List[Tuple[Any, ...]]) -> None:
        super().__init__(sample_interval=100)
        self.log = log

    def predict(self, inputs, states=None):
        self.log.append(("predict", self.key, int(inputs["obs"][0])))
        return super().predict(inputs, states)

    def store_data(self, inputs, actions, reward, next_inputs, terminated, truncated, states=None, next_states=None):
        row = ("store", self.key, int(inputs["obs"][0]), float(reward), bool(terminated), bool(truncated))
        self.log.append(row + ((next_inputs["state"].tolist(),) if "state" in next_inputs else ()))
        return super().store_data(inputs, actions, reward, next_inputs, terminated, truncated, states, next_states)


def recorders(agent: PettingZooAgent, tasks: List[str]) -> Tuple[Dict[str, Recorder], List[Tuple[Any, ...]]]:
    """One Recorder per environment agent of ``agent``, sharing one log."""
    log: List[Tuple[Any, ...]] = []
    helpers = {}
    for key in agent.helper_tasks(tasks):
        helpers[key] = Recorder(log)
        helpers[key].key = key
    return helpers, log


def play(make_manager, agent: PettingZooAgent, tasks=("T",)) -> Tuple[List[dict], List[Tuple[Any, ...]]]:
    """``agent``'s episodes in a threads robot of echo tasks ``tasks``, and its helpers' log."""
    manager = make_manager(tasks=tasks)
    helpers, log = recorders(agent, list(tasks))
    manager.add_agent(agent, helpers)
    manager.start()
    episodes = manager.join(timeout=10)
    assert manager.errors == []
    return episodes, log


def test_add_agent_binds_several_helpers_of_one_task_and_names_bad_keys_and_tasks(make_manager) -> None:
    manager = make_manager()
    env = ComingAndGoingEnv(0)
    helpers = {"first": parl.OnPolicyHelper(), "second": parl.OnPolicyHelper()}
    with pytest.raises(ValueError, match=r"tasks names helpers \['third'\] the agent does not have"):
        manager.add_agent(PettingZooAgent(env), dict(helpers), tasks={"first": "T", "third": "T"})
    with pytest.raises(ValueError, match=r"helpers for unknown tasks \['U'\]; tasks are \['T'\]"):
        manager.add_agent(PettingZooAgent(env), dict(helpers), tasks={"first": "T", "second": "U"})
    manager.add_agent(PettingZooAgent(env), dict(helpers), tasks={"first": "T", "second": "T"})
    assert helpers["first"].task_name == helpers["second"].task_name == "T"
    assert helpers["first"].communicator is not helpers["second"].communicator
    manager.start()
    for value, helper in ((7, helpers["first"]), (9, helpers["second"])):
        actions, _ = helper.predict({"obs": np.array([value, 0.0], np.float32)})
        assert int(actions["action"][0]) == value
    assert manager.wrappers["T"].stats.predictions == 2


# -- Parallel episodes --------------------------------------------------------------------------------------


def test_agents_leaving_early_close_their_trajectories_and_are_never_asked_again(make_manager) -> None:
    agent = PettingZooAgent(
        ComingAndGoingEnv(2, length=6, end_at=2, cut_at=4, enter_at=3), policy_mapping="T", num_games=1
    )
    (episode,), log = play(make_manager, agent)
    asked = {key: [v % 100 for kind, k, v, *_ in log if kind == "predict" and k == key] for key in agent.agent_ids}
    assert asked == {
        "blue_stay": [0, 1, 2, 3, 4, 5],
        "blue_end": [0, 1],
        "red_cut": [0, 1, 2, 3],
        "red_late": [3, 4, 5],
    }
    stored = {key: [row[2:6] for row in log if row[0] == "store" and row[1] == key] for key in agent.agent_ids}
    # Its own rewards (the echo value it acted on); the last transition of each closes it as it left.
    for key, index, times, terminated in (
        ("blue_stay", 0, range(6), False),
        ("blue_end", 1, range(2), True),
        ("red_cut", 2, range(4), False),
        ("red_late", 3, range(3, 6), False),
    ):
        values = [2000 + 100 * index + t for t in times]
        ends = [(False, False)] * (len(values) - 1) + [(terminated, not terminated)]
        assert stored[key] == [(v, float(v), *end) for v, end in zip(values, ends)], key
    assert agent.env.mismatches == 0
    assert episode["steps"] == 6 and agent.total_steps == 6


def test_an_agent_entering_mid_episode_starts_fresh_in_every_episode(make_manager) -> None:
    agent = PettingZooAgent(ComingAndGoingEnv(1, enter_at=2, cut_at=3, length=4), policy_mapping="T", num_games=2)
    episodes, log = play(make_manager, agent)
    late = [row[2] % 100 for row in log if row[0] == "predict" and row[1] == "red_late"]
    assert late == [2, 3, 2, 3] and len(episodes) == 2


def test_global_state_reaches_every_agent_and_needs_a_state_method(make_manager) -> None:
    state_specs = OBS_SPECS + [("state", dict(shape=[2], dtype="float32"))]
    manager = parl.Manager(
        {"T": parl.TaskSettings(lambda: EchoAlgorithm(lambda: EchoModel(input_specs=state_specs)))},
        placement="threads",
        thread_placement="os",
    )
    try:
        agent = PettingZooAgent(
            ComingAndGoingEnv(3, length=3, end_at=1, cut_at=2, enter_at=1),
            policy_mapping="T",
            num_games=1,
            global_state="state",
        )
        helpers, log = recorders(agent, ["T"])
        manager.add_agent(agent, helpers)
        manager.start()
        manager.join(timeout=10)
        assert manager.errors == []
    finally:
        manager.stop()
    # next_inputs["state"] of each transition: [1000 * code + time, agents now] after the step.
    states = {(row[1], row[2] % 100): row[6] for row in log if row[0] == "store"}
    assert states[("blue_stay", 0)] == [3001.0, 3.0]  # blue_end left, red_late entered
    assert states[("red_cut", 1)] == [3002.0, 2.0]
    assert states[("blue_stay", 2)] == [3003.0, 0.0]

    class NoState:
        possible_agents = ["a"]

        def action_space(self, agent):
            return ComingAndGoingEnv().action_space(agent)

    with pytest.raises(ValueError, match="global_state='state': NoState has no state()"):
        PettingZooAgent(NoState(), global_state="state")


def test_episode_statistics_give_the_mean_return_and_one_per_task(make_manager) -> None:
    agent = PettingZooAgent(
        ComingAndGoingEnv(0, length=6, end_at=2, cut_at=4, enter_at=3),
        policy_mapping={"blue_*": "blue", "red_*": "red"},
        num_games=1,
    )
    (episode,), _ = play(make_manager, agent, tasks=("blue", "red"))
    returns = {
        "blue_stay": sum(range(0, 6)),
        "blue_end": sum(100 + t for t in range(2)),
        "red_cut": sum(200 + t for t in range(4)),
        "red_late": sum(300 + t for t in range(3, 6)),
    }
    assert episode["reward"] == pytest.approx(np.mean(list(returns.values())))
    assert episode["reward_blue"] == pytest.approx((returns["blue_stay"] + returns["blue_end"]) / 2)
    assert episode["reward_red"] == pytest.approx((returns["red_cut"] + returns["red_late"]) / 2)
    assert episode["steps"] == 6


# -- AEC episodes ------------------------------------------------------------------------------------------


def test_players_take_turns_and_a_transition_spans_from_a_turn_to_the_next(make_manager) -> None:
    agent = PettingZooAgent(TurnTakingEnv(4, players=3, rounds=2), policy_mapping="T", num_games=1)
    (episode,), log = play(make_manager, agent)
    turns = [(key, value % 100) for kind, key, value, *_ in log if kind == "predict"]
    assert turns == [
        ("player_0", 0),
        ("player_1", 1),
        ("player_2", 2),
        ("player_0", 3),
        ("player_1", 4),
        ("player_2", 5),
    ]
    stored = [row[1:6] for row in log if row[0] == "store"]
    # player_0's first transition is stored at its second turn: its own turn's reward and 1 per turn of the
    # others; the last ones at each player's final turn, after the game ended, terminated.
    assert stored == [
        ("player_0", 4000, 4002.0, False, False),
        ("player_1", 4101, 4103.0, False, False),
        ("player_2", 4202, 4204.0, False, False),
        ("player_0", 4003, 4005.0, True, False),
        ("player_1", 4104, 4105.0, True, False),
        ("player_2", 4205, 4205.0, True, False),
    ]
    assert episode["steps"] == 6 and agent.env.mismatches == 0


def test_a_truncated_game_closes_every_player_truncated(make_manager) -> None:
    agent = PettingZooAgent(TurnTakingEnv(0, players=2, rounds=1, truncate=True), policy_mapping="T", num_games=1)
    _, log = play(make_manager, agent)
    assert [row[4:6] for row in log if row[0] == "store"] == [(False, True), (False, True)]


# -- configs and runs ---------------------------------------------------------------------------------------

SPREAD: Dict[str, Any] = {
    "seed": 0,
    "agents": 2,
    "env": {
        "factory": "mpe2.simple_spread_v3.parallel_env",
        "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": False},
    },
    "agent": {"class": "parl.multiagent.PettingZooAgent", "policy_mapping": {"agent_0": "lead", "*": "RL"}},
    "tasks": {
        name: {
            "model": {"class": "parl.models.MLPActorCritic", "hidden_sizes": [16]},
            "algorithm": {"class": "parl.algorithms.A2C", "gamma": 0.99, "learning_rate": 0.001},
            "helper": {"class": "parl.OnPolicyHelper", "sample_interval": 25},
        }
        for name in ("lead", "RL")
    },
    "train": {"max_env_steps": 300},
    "evaluation": {"every_steps": None, "episodes": 2},
}


def write(tmp_path: Path, changes: Dict[str, Any]) -> str:
    path = tmp_path / "spread.yaml"
    data = {**SPREAD, "log_dir": str(tmp_path / "run"), **changes}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")  # patterns are tried in order
    return str(path)


def test_a_pettingzoo_config_sizes_each_task_by_its_agents(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {}))
    for name in ("lead", "RL"):
        assert config.tasks[name].model_sizes == {"obs_dim": 18, "num_actions": 5}


def test_a_pettingzoo_config_names_an_unknown_task_and_a_single_agent_class_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as unmapped:  # a task no agent is mapped to: its sizes cannot be inferred
        load_config(write(tmp_path, {"agent": {**SPREAD["agent"], "policy_mapping": "RL"}}))
    message = str(unmapped.value)
    assert message.startswith("tasks.lead.model.obs_dim: missing") and "maps no environment agent" in message
    with pytest.raises(ConfigError) as unknown:
        load_config(write(tmp_path, {"agent": {**SPREAD["agent"], "policy_mapping": {"*": "blue"}}}))
    message = str(unknown.value)
    assert message.startswith("agent.policy_mapping: agent 'agent_0' is mapped to task 'blue'") and "\n" not in message
    with pytest.raises(ConfigError) as single:
        load_config(write(tmp_path, {"agent": {"class": "parl.utils.GymAgent"}}))
    message = str(single.value)
    assert (
        message.startswith("agent.class: parl.utils.GymAgent plays single-agent environments") and "\n" not in message
    )


def test_placement_rlx_refuses_a_multi_agent_environment_in_one_line(tmp_path: Path, capsys) -> None:
    manager = parl.Manager(
        {"T": parl.TaskSettings(lambda: EchoAlgorithm())},
        placement=parl.runtime.registry.entry("rlx").make_options({"bind": "127.0.0.1:0"}),
    )
    try:
        with pytest.raises(ValueError, match="placement 'rlx' serves single-agent environments .* ComingAndGoingEnv"):
            manager.environment(ComingAndGoingEnv)
    finally:
        manager.stop()
    assert main(["train", write(tmp_path, {"placement": "rlx"}), "--quiet"]) != 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line]
    assert "placement 'rlx' serves single-agent environments" in line


def test_a_multi_agent_run_trains_evaluates_resumes_and_exports_with_metrics_per_task(tmp_path: Path, capsys) -> None:
    config = write(tmp_path, {})
    run = str(tmp_path / "run")
    assert main(["train", config, "--quiet"]) == 0
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as rows:
        tags = set().union(*(json.loads(line) for line in rows))
    assert {
        "episode/reward",
        "episode/reward_lead",
        "episode/reward_RL",
        "task/lead/grad_norm",
        "task/RL/grad_norm",
    } <= tags
    capsys.readouterr()

    assert main(["eval", config, "--checkpoint", run, "--episodes", "2"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 2 and len(summary["returns"]) == 2

    first = json.loads(Path(run, "result.json").read_text(encoding="utf-8"))
    assert main(["train", config, "-o", "train.max_env_steps=600", "--resume", "--quiet"]) == 0
    again = json.loads(Path(run, "result.json").read_text(encoding="utf-8"))
    assert again["resumed_from"] == first["checkpoint"] and again["env_steps"] >= 600
    assert all(again["updates"][name] > first["updates"][name] for name in ("lead", "RL"))

    out = str(tmp_path / "policy")
    assert main(["export", run, "-o", out]) == 0
    policy = parl.load_policy(out)
    obs = np.zeros((3, 18), np.float32)
    for name in ("lead", "RL"):
        actions, _ = policy.tasks[name].predict({"obs": obs}, {}, deterministic=True)
        assert actions["action"].shape[0] == 3
