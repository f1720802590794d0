"""Robot configs: each malformed config gives one exact line naming the key; valid ones load, take
overrides, resolve nested class specs and build a working Manager."""

from __future__ import annotations

import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Sequence

import numpy as np
import pytest
import yaml

import parl
from parl.algorithms import PPO
from parl.experiment.config.build import agent_seed, build_manager, make_agent, make_env, make_helpers, task_settings
from parl.experiment.config.robot_config import ConfigError, RobotConfig, load_config
from parl.models import MLPActorCritic
from parl.runtime.cooperative.options import CooperativeOptions
from parl.runtime.processes.options import MAX_WORKERS as MAX_PROCESSES
from parl.runtime.processes.options import ProcessesOptions
from parl.runtime.threads.options import ThreadsOptions
from parl.utils import GymAgent, LinearSchedule
from parl.validation import ParameterError, check_range

VALID = """\
seed: 1
agents: 2
env:
  id: CartPole-v1
agent:
  class: parl.utils.GymAgent
  num_games: 1
tasks:
  RL:
    model: {class: parl.models.MLPActorCritic, obs_dim: 4, num_actions: 2, hidden_sizes: [16, 16]}
    algorithm: {class: parl.algorithms.PPO, gamma: 0.99, learning_rate: 1.0e-3, epochs: 1, num_minibatches: 1}
    helper: {class: parl.OnPolicyHelper, sample_interval: 8}
    batching: {max_batchsize: 2, min_batchsize: 1, training_timeout: 0.01}
train:
  max_env_steps: 1000
  target_return: 475.0
"""

#: Marks a key to delete in :func:`changed`.
DELETE = object()


def changed(changes: Mapping[str, Any]) -> Dict[str, Any]:
    """The valid config with ``{"dotted.key": value}`` set (or deleted with DELETE)."""
    data = yaml.safe_load(VALID)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return data


def write(tmp_path: Path, data: Any, name: str = "robot.yaml") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def error_of(path: str, overrides: Sequence[str] = ()) -> str:
    """The ConfigError message of loading ``path``: always one line, never a traceback."""
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


PPO_OPTIONS = (
    "advantage_normalization, clip_range, clip_range_schedule, entropy_coef, epochs, gae_lambda, gamma, grad_clip, "
    "learning_rate, learning_rate_schedule, minibatch_size, num_minibatches, schedule_steps, value_clip, value_coef, "
    "value_normalization"
)
TOP_KEYS = (
    "name, seed, agents, log_dir, python_path, thread_placement, placement, stall_seconds, "
    "env, agent, tasks, shared, self_play, train, evaluation, checkpoint, faults, callbacks"
)

MALFORMED = {
    "unknown top-level key": ({"seeds": 1}, "seeds: unknown key; did you mean 'seed'?"),
    "unknown key, nothing close": ({"colour": "red"}, f"colour: unknown key; expected one of: {TOP_KEYS}"),
    "unknown nested key": (
        {"train.max_env_step": 10},
        "train.max_env_step: unknown key; did you mean 'max_env_steps'?",
    ),
    "unknown task key": ({"tasks.RL.helpr": {}}, "tasks.RL.helpr: unknown key; did you mean 'helper'?"),
    "missing max_env_steps": ({"train.max_env_steps": DELETE}, "train.max_env_steps: missing required key"),
    "missing tasks": ({"tasks": DELETE}, "tasks: missing required key"),
    "missing helper": ({"tasks.RL.helper": DELETE}, "tasks.RL.helper: missing required key"),
    "no tasks": ({"tasks": {}}, "tasks: expected at least one task, got none"),
    "section not a mapping": ({"train": 5}, "train: expected a mapping, got 5"),
    "agents as text": ({"agents": "eight"}, "agents: expected an integer, got 'eight'"),
    "no agents": ({"agents": 0}, "agents: expected an integer >= 1, got 0"),
    "bad choice": (
        {"thread_placement": "fast"},
        "thread_placement: expected one of ['auto', 'one_core', 'split', 'os'], got 'fast'",
    ),
    "optional integer": (
        {"evaluation": {"every_steps": 0}},
        "evaluation.every_steps: expected an integer >= 1 or null, got 0",
    ),
    "gamma out of range": (
        {"tasks.RL.algorithm.gamma": 1.5},
        "tasks.RL.algorithm.gamma: expected a number in [0.0, 1.0], got 1.5",
    ),
    "negative learning rate": (
        {"tasks.RL.algorithm.learning_rate": -0.001},
        "tasks.RL.algorithm.learning_rate: expected a positive number, got -0.001",
    ),
    "algorithm choice": (
        {"tasks.RL.algorithm.advantage_normalization": "all"},
        "tasks.RL.algorithm.advantage_normalization: expected one of ['minibatch', 'batch', 'none'], got 'all'",
    ),
    "unknown algorithm option": (
        {"tasks.RL.algorithm.gama": 0.9},
        "tasks.RL.algorithm.gama: unknown option of parl.algorithms.PPO; did you mean 'gamma'? "
        f"(options: {PPO_OPTIONS})",
    ),
    "unimportable model class": (
        {"tasks.RL.model.class": "parl.models.MLPActorCritc"},
        "tasks.RL.model.class: cannot import 'parl.models.MLPActorCritc': 'parl.models' has no attribute "
        "'MLPActorCritc'; did you mean 'MLPActorCritic'?",
    ),
    "missing module": (
        {"agent.class": "nosuchpackage.Agent"},
        "agent.class: cannot import 'nosuchpackage.Agent': no module named 'nosuchpackage'",
    ),
    "agent class not an Agent": (
        {"agent.class": "parl.models.MLPActorCritic"},
        "agent.class: expected a subclass of parl.Agent, got 'parl.models.MLPActorCritic'",
    ),
    "agent seed given": (
        {"agent.seed": 3},
        "agent.seed: not an option here: each agent is given seed=<seed * 1000 + its index>; set the top-level seed",
    ),
    "env with id and factory": ({"env.factory": "gymnasium.make"}, "env: give exactly one of id and factory, got both"),
    "model option of the wrong type": (
        {"tasks.RL.model.hidden_sizes": 64},
        "tasks.RL.model.hidden_sizes: expected a list of integers, got 64",
    ),
    "bool for an int": ({"tasks.RL.model.obs_dim": True}, "tasks.RL.model.obs_dim: expected an integer, got True"),
    "int for a bool": ({"tasks.RL.model.shared": 1}, "tasks.RL.model.shared: expected true or false, got 1"),
    "text for an optional number": (
        {"tasks.RL.algorithm.value_clip": "big"},
        "tasks.RL.algorithm.value_clip: expected a number or null, got 'big'",
    ),
    "missing model option": (
        {"tasks.RL.model": {"class": "parl.models.MLPQModel"}, "env.id": "Pendulum-v1"},
        "tasks.RL.model.num_actions: missing, required by parl.models.MLPQModel, and env Pendulum-v1 declares "
        "none (its action space is Box(-2.0, 2.0, (1,), float32))",
    ),
    "model obs_dim not the env's": (
        {"tasks.RL.model.obs_dim": 5},
        "tasks.RL.model.obs_dim: 5 does not match env CartPole-v1's observation shape [4]",
    ),
    "model num_actions not the env's": (
        {"tasks.RL.model.num_actions": 3},
        "tasks.RL.model.num_actions: 3 does not match env CartPole-v1's action space Discrete(2)",
    ),
    "continuous model on discrete actions": (
        {"tasks.RL.model.num_actions": DELETE, "tasks.RL.model.action_dim": 2},
        "tasks.RL.model.action_dim: 2 does not match env CartPole-v1's action space Discrete(2)",
    ),
    "model check": ({"tasks.RL.model.obs_dim": 0}, "tasks.RL.model.obs_dim: expected an integer >= 1, got 0"),
    "model error": (
        {"tasks.RL.model.action_dim": 1},
        "tasks.RL.model: give exactly one of num_actions (discrete) and action_dim (continuous), "
        "got num_actions=2, action_dim=1",
    ),
    "helper check": (
        {"tasks.RL.helper.sample_interval": 0},
        "tasks.RL.helper.sample_interval: expected an integer >= 1, got 0",
    ),
    "model the algorithm cannot use": (
        {"tasks.RL.model": {"class": "parl.models.MLPQModel", "obs_dim": 4, "num_actions": 2}},
        "tasks.RL.algorithm: PPO needs a parl.models.ActorCriticModel, got MLPQModel",
    ),
    "batching": (
        {"tasks.RL.batching.min_batchsize": 3},
        "tasks.RL.batching.min_batchsize: expected at most the batches joined per update (2), got 3",
    ),
    "a shared group of one task": (
        {"shared": {"trunk": {"RL": "model.actor_hidden"}}},
        "shared.trunk: expected a mapping of at least two task names to paths, got {'RL': 'model.actor_hidden'}",
    ),
    "a shared group naming an unknown task": (
        {"shared": {"trunk": {"RL": "model.actor_hidden", "RL2": "model.trunk"}}},
        "shared.trunk: unknown task 'RL2'; tasks are ['RL']",
    ),
    "normalizing an unknown input": (
        {"tasks.RL.transforms": {"normalize_inputs": ["pixels"]}},
        "tasks.RL.transforms: task 'RL': normalize_inputs names ['pixels'], float inputs are ['obs']",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_config_gives_one_line_naming_the_key(tmp_path: Path, case: str) -> None:
    changes, expected = MALFORMED[case]
    assert error_of(write(tmp_path, changed(changes))) == expected


BAD_OVERRIDES = {
    "tarin.max_env_steps=10": "tarin: unknown key; did you mean 'train'? (in -o tarin.max_env_steps=10)",
    "train.max_env_step=10": "train.max_env_step: unknown key; did you mean 'max_env_steps'? "
    "(in -o train.max_env_step=10)",
    "tasks.RL2.model.obs_dim=3": "tasks.RL2: no such task; tasks are ['RL'] (in -o tasks.RL2.model.obs_dim=3)",
    "seed.value=3": "seed: expected a mapping to set 'value' in, got 1 (in -o seed.value=3)",
    "seed": "seed: expected an override key.path=value",
    "tasks.RL.algorithm.gama=0.9": f"tasks.RL.algorithm.gama: unknown option of parl.algorithms.PPO; did you mean "
    f"'gamma'? (options: {PPO_OPTIONS})",
    "seed=[1": "seed: cannot parse '[1': expected ',' or ']', but got '<stream end>' (in -o seed=[1)",
}


@pytest.mark.parametrize("override", list(BAD_OVERRIDES))
def test_a_bad_override_is_named(tmp_path: Path, override: str) -> None:
    assert error_of(write(tmp_path, VALID), [override]) == BAD_OVERRIDES[override]


def test_yaml_syntax_errors_give_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "seed: 0\nagents: 2\n  env: 3\n")
    assert error_of(path) == f"{path}:3: mapping values are not allowed here"


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "seed: 2\n")
    assert error_of(path) == f"{path}:{VALID.count(chr(10)) + 1}: duplicate key 'seed'"


def test_missing_empty_and_non_mapping_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing.yaml")
    assert error_of(missing) == f"{missing}: no such file"
    empty = write(tmp_path, "", "empty.yaml")
    assert error_of(empty) == f"{empty}: the file is empty"
    listed = write(tmp_path, "- 1\n- 2\n", "list.yaml")
    assert error_of(listed) == f"{listed}: expected a mapping of config keys, got a list"


def test_python_path_entries_must_exist(tmp_path: Path) -> None:
    path = write(tmp_path, changed({"python_path": ["lib"]}))
    assert error_of(path) == f"python_path[0]: no such directory {str((tmp_path / 'lib').resolve())!r}"


def test_an_unknown_env_id_is_reported_by_gymnasium(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, changed({"env.id": "CartPol-v1"})))
    assert message.startswith("env.id: ") and "CartPol" in message


def test_parameter_errors_carry_name_expected_and_value() -> None:
    with pytest.raises(ParameterError) as info:
        check_range("gamma", 1.5, 0.0, 1.0)
    error = info.value
    assert (error.name, error.expected, error.value) == ("gamma", "a number in [0.0, 1.0]", 1.5)
    assert str(error) == "gamma must be a number in [0.0, 1.0], got 1.5"
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.name, copy.expected, copy.value, str(copy)) == (error.name, error.expected, error.value, str(error))


# -- valid configs ----------------------------------------------------------------------------


def test_a_valid_config_loads_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID, "ppo_cartpole.yaml"))
    assert isinstance(config, RobotConfig)
    assert (config.name, config.seed, config.agents, config.log_dir) == ("ppo_cartpole", 1, 2, "runs/ppo_cartpole")
    assert config.thread_placement == "auto" and config.python_path == []
    task = config.tasks["RL"]
    assert task.model.cls is MLPActorCritic and task.algorithm.cls is PPO and task.helper.cls is parl.OnPolicyHelper
    assert task.model.kwargs["hidden_sizes"] == [16, 16]
    assert task.algorithm.kwargs["learning_rate"] == 1e-3
    assert task.batching.max_training_batchsize is None and task.transforms.reward_clip is None
    assert (config.train.max_env_steps, config.train.target_return) == (1000, 475.0)
    assert (config.evaluation.every_steps, config.evaluation.episodes, config.evaluation.start_return) == (
        10_000,
        10,
        None,
    )
    assert (config.checkpoint.every_steps, config.checkpoint.every_minutes, config.checkpoint.keep) == (None, 10.0, 3)


def test_anchors_merge_keys_and_shared_parts(tmp_path: Path) -> None:
    text = VALID.replace("    model: {class", "    model: &model {class").replace(
        "    algorithm: {class", "    algorithm: &ppo {class"
    )
    text = text.replace(
        "train:\n",
        "  Aux:\n"
        "    model: *model\n"
        "    algorithm: {<<: *ppo, gamma: 0.9}\n"
        "    helper: {class: parl.OnPolicyHelper}\n"
        "shared:\n"
        "  trunk: {RL: model.actor_hidden, Aux: model.actor_hidden}\n"
        "train:\n",
    )
    config = load_config(write(tmp_path, text))
    aux = config.tasks["Aux"].algorithm.kwargs
    assert (aux["gamma"], aux["learning_rate"]) == (0.9, 1e-3)
    assert config.shared == {"trunk": {"RL": "model.actor_hidden", "Aux": "model.actor_hidden"}}
    manager = build_manager(config)
    assert manager.linked_tasks == [["RL", "Aux"]]
    rl, aux_task = manager.tasks["RL"].algorithm.model, manager.tasks["Aux"].algorithm.model
    assert rl.actor_hidden is aux_task.actor_hidden and rl.critic_hidden is not aux_task.critic_hidden


def test_exponents_without_a_dot_are_floats(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID.replace("learning_rate: 1.0e-3", "learning_rate: 3e-4")))
    assert config.tasks["RL"].algorithm.kwargs["learning_rate"] == 3e-4


def test_overrides_apply(tmp_path: Path) -> None:
    overrides = [
        "seed=3",
        "tasks.RL.algorithm.learning_rate=1e-3",
        "tasks.RL.model.hidden_sizes=[8]",
        "train.target_return=null",
        "evaluation.episodes=3",
        "name=short run",
    ]
    path = write(tmp_path, VALID)
    assert error_of(path, overrides) == "name: expected a name of letters, digits, '_', '-' and '.', got 'short run'"
    config = load_config(path, overrides[:-1])
    assert config.seed == 3 and config.train.target_return is None and config.evaluation.episodes == 3
    assert config.tasks["RL"].algorithm.kwargs["learning_rate"] == 1e-3
    assert config.tasks["RL"].model.kwargs["hidden_sizes"] == [8]


def test_the_resolved_config_loads_back_the_same(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))
    data = config.to_dict()
    again = load_config(write(tmp_path, yaml.safe_dump(data), "resolved.yaml"))
    assert again.to_dict() == data
    assert data["tasks"]["RL"]["transforms"]["normalize_inputs"] is False
    assert data["agent"] == {"class": "parl.utils.GymAgent", "num_games": 1}


def test_an_override_of_one_task_leaves_a_task_sharing_its_yaml_anchor_alone() -> None:
    path = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "ppo_tictactoe_selfplay.yaml")
    config = load_config(path, ["tasks.RL.algorithm.learning_rate=0.5", "tasks.opponent.model.hidden_sizes=[128]"])
    rl, opponent = config.tasks["RL"], config.tasks["opponent"]  # both written with the anchors &algorithm, &model
    assert rl.algorithm.kwargs["learning_rate"] == 0.5 and opponent.algorithm.kwargs["learning_rate"] == 0.0003
    assert opponent.model.kwargs["hidden_sizes"] == [128] and rl.model.kwargs["hidden_sizes"] == [128, 128]


def test_a_class_spec_among_a_factorys_kwargs_loads_back_the_same(tmp_path: Path) -> None:
    path = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "ppo_tictactoe_selfplay.yaml")
    config = load_config(path, ["env.kwargs={env: {class: pettingzoo.classic.tictactoe_v3.env}}"])
    data = config.to_dict()
    assert data["env"]["kwargs"] == {"env": {"class": "pettingzoo.classic.tictactoe_v3.env"}}
    again = load_config(write(tmp_path, yaml.safe_dump(data), "resolved.yaml"))
    assert again.to_dict() == data


PARTS = """
from typing import Optional, Tuple

import gymnasium as gym

import parl
from parl.utils import GymAgent, LinearSchedule


class ScheduledAgent(GymAgent):
    def __init__(self, env, *, epsilon: LinearSchedule, sizes: Tuple[int, ...] = (1,), seed: int = 0,
                 limit: Optional[int] = None) -> None:
        super().__init__(env, seed=seed)
        self.epsilon, self.sizes, self.limit = epsilon, sizes, limit


class SeededHelper(parl.OnPolicyHelper):
    def __init__(self, *, sample_interval: int = 5, seed: Optional[int] = None) -> None:
        super().__init__(sample_interval=sample_interval)
        self.seed = seed


def make_cartpole(max_episode_steps: int = 500):
    return gym.make("CartPole-v1", max_episode_steps=max_episode_steps)
"""


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dict[str, Any]]:
    """A config whose classes come from a module in ``lib/`` (on python_path), ``sys.path`` restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "robot_parts", raising=False)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "robot_parts.py").write_text(textwrap.dedent(PARTS))
    data = changed(
        {
            "seed": 3,
            "python_path": ["lib"],
            "env": {"factory": "robot_parts.make_cartpole", "kwargs": {"max_episode_steps": 20}},
            "agent": {
                "class": "robot_parts.ScheduledAgent",
                "epsilon": {"class": "parl.utils.LinearSchedule", "start": 1.0, "end": 0.1, "steps": 10},
                "sizes": [4, 5],
            },
            "tasks.RL.helper": {"class": "robot_parts.SeededHelper", "sample_interval": 4},
        }
    )
    yield data
    sys.modules.pop("robot_parts", None)


def test_nested_specs_build_fresh_objects_for_each_agent(tmp_path: Path, parts: Dict[str, Any]) -> None:
    config = load_config(write(tmp_path, parts))
    assert config.python_path == [str((tmp_path / "lib").resolve())]
    first, second = make_agent(config, 0), make_agent(config, 1)
    assert isinstance(first.epsilon, LinearSchedule) and first.epsilon is not second.epsilon
    assert first.epsilon(5) == pytest.approx(0.55)
    assert first.sizes == (4, 5) and first.limit is None  # a list becomes a tuple where a tuple is hinted
    assert (first.seed, second.seed) == (3000, 3001) == (agent_seed(config, 0), agent_seed(config, 1))
    assert first.env is not second.env and first.env.spec.max_episode_steps == 20
    assert make_env(config).spec.max_episode_steps == 20
    assert make_helpers(config, 1)["RL"].seed == 3001


def test_nested_specs_are_checked_at_their_own_key(tmp_path: Path, parts: Dict[str, Any]) -> None:
    parts["agent"]["epsilon"]["steps"] = 0
    assert error_of(write(tmp_path, parts)) == "agent.epsilon.steps: expected an integer >= 1, got 0"
    parts["agent"]["epsilon"] = 0.5
    assert error_of(write(tmp_path, parts)) == (
        "agent.epsilon: expected a parl.utils.schedules.LinearSchedule (a {class: ...} mapping), got 0.5"
    )
    del parts["agent"]["epsilon"]
    assert error_of(write(tmp_path, parts)) == "agent.epsilon: missing, required by robot_parts.ScheduledAgent"


def test_tuple_items_are_checked(tmp_path: Path, parts: Dict[str, Any]) -> None:
    parts["agent"]["sizes"] = [4, "five"]
    assert error_of(write(tmp_path, parts)) == "agent.sizes[1]: expected an integer, got 'five'"
    parts["agent"]["sizes"] = [4]
    parts["env"]["kwargs"] = {"max_episode_steps": "long"}
    assert error_of(write(tmp_path, parts)) == "env.kwargs.max_episode_steps: expected an integer, got 'long'"


def test_task_settings_build_a_fresh_algorithm_each_time(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))
    settings = task_settings(config, "RL")
    batching = settings.batching
    assert (batching.max_batchsize, batching.min_batchsize, batching.training_timeout) == (2, 1, 0.01)
    first, second = settings.algorithm_func(), settings.algorithm_func()
    assert isinstance(first, PPO) and first is not second and first.model is not second.model
    assert first.gamma == 0.99 and first.epochs == 1
    with pytest.raises(ValueError, match=r"no task 'Goal'; tasks are \['RL'\]"):
        task_settings(config, "Goal")


def test_model_sizes_default_to_the_env_spaces(tmp_path: Path) -> None:
    data = changed({"tasks.RL.model.obs_dim": DELETE, "tasks.RL.model.num_actions": DELETE, "env.id": "Acrobot-v1"})
    config = load_config(write(tmp_path, data))
    assert config.tasks["RL"].model_sizes == {"obs_dim": 6, "num_actions": 3}
    assert "obs_dim" not in config.to_dict()["tasks"]["RL"]["model"]  # the dumped config stays env-neutral
    model = task_settings(config, "RL").algorithm_func().model
    assert (model.obs_dim, model.num_actions) == (6, 3)


def test_stated_model_sizes_are_kept(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))  # obs_dim and num_actions stated, equal to CartPole's
    assert config.tasks["RL"].model_sizes == {}
    pendulum = changed(
        {"env.id": "Pendulum-v1", "tasks.RL.model.obs_dim": DELETE, "tasks.RL.model.num_actions": DELETE}
    )
    sizes = load_config(write(tmp_path, pendulum)).tasks["RL"].model_sizes
    assert sizes == {"obs_dim": 3, "action_dim": 1}  # an actor-critic takes the Box's size as action_dim


def test_build_manager_gives_a_robot_that_plays(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))
    manager = build_manager(config)
    try:
        assert set(manager.tasks) == {"RL"} and len(manager.agents) == 2
        assert all(isinstance(agent, GymAgent) for agent in manager.agents)
        assert [agent.seed for agent in manager.agents] == [1000, 1001]
        manager.start()
        episodes = manager.join(timeout=30.0)
    finally:
        manager.stop()
    assert not manager.errors
    assert len(episodes) == 2 and all(e["steps"] > 0 for e in episodes)
    stats = manager.wrappers["RL"].stats
    assert stats.predictions == sum(e["steps"] for e in episodes) and stats.training_batches > 0
    actions, _ = manager.tasks["RL"].predict({"obs": np.zeros((3, 4), np.float32)}, {})
    assert actions["action"].shape == (3, 1)


def test_final_episodes_default_to_null_and_take_a_positive_integer(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))
    assert config.evaluation.final_episodes is None and config.to_dict()["evaluation"]["final_episodes"] is None
    assert load_config(write(tmp_path, VALID), ["evaluation.final_episodes=50"]).evaluation.final_episodes == 50
    assert error_of(write(tmp_path, VALID), ["evaluation.final_episodes=0"]) == (
        "evaluation.final_episodes: expected an integer >= 1 or null, got 0"
    )


def test_batch_sizes_may_say_agents(tmp_path: Path) -> None:
    batching = {"max_batchsize": "agents", "min_batchsize": "agents", "max_training_batchsize": "agents"}
    path = write(tmp_path, changed({"tasks.RL.batching": {**batching, "training_timeout": 1.0}}))
    for agents in (2, 8):
        config = load_config(path, [f"agents={agents}"])
        sizes = config.tasks["RL"].batching
        assert (sizes.max_batchsize, sizes.min_batchsize, sizes.max_training_batchsize) == (agents,) * 3
        assert config.to_dict()["tasks"]["RL"]["batching"] == {
            **dict.fromkeys(batching, agents),
            "training_timeout": 1.0,
        }
        settings = task_settings(config, "RL")
        assert (settings.max_batchsize, settings.min_batchsize, settings.max_training_batchsize) == (agents,) * 3
    assert error_of(path, ["tasks.RL.batching.max_batchsize=agent"]) == (
        "tasks.RL.batching.max_batchsize: expected an integer or 'agents', got 'agent'"
    )


def test_min_batchsize_is_at_most_the_number_of_agents(tmp_path: Path) -> None:
    sizes = {"max_batchsize": 8, "min_batchsize": 8, "max_training_batchsize": 8}
    path = write(tmp_path, changed({"agents": 4, "tasks.RL.batching": sizes}))
    assert error_of(path) == "tasks.RL.batching.min_batchsize: expected at most the number of agents (4), got 8"
    assert load_config(path, ["agents=8"]).tasks["RL"].batching.min_batchsize == 8


def test_stall_seconds_reaches_the_managers_watchdog(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    assert load_config(path).stall_seconds == 60.0
    assert build_manager(load_config(path, ["stall_seconds=5"])).stall_seconds == 5.0
    assert build_manager(load_config(path, ["stall_seconds=null"])).stall_seconds is None
    assert error_of(path, ["stall_seconds=0"]).startswith("stall_seconds: expected a positive number")


def test_max_skipped_updates_reaches_the_task(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    assert load_config(path).tasks["RL"].max_skipped_updates == 100
    task = task_settings(load_config(path, ["tasks.RL.max_skipped_updates=3"]), "RL").make_task("RL")
    assert task._skips.max_in_a_row == 3
    assert error_of(path, ["tasks.RL.max_skipped_updates=0"]) == (
        "tasks.RL.max_skipped_updates: expected an integer >= 1, got 0"
    )


def test_the_placement_block_is_a_name_and_that_placements_options(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    config = load_config(path, ["placement.name=processes", "placement.heartbeat_timeout=2.5"])
    assert config.placement.name == "processes"
    assert config.placement.options == ProcessesOptions(heartbeat_timeout=2.5)
    assert build_manager(config).placement_options == ProcessesOptions(heartbeat_timeout=2.5)  # not started
    assert config.to_dict()["placement"] == {
        "name": "processes",
        "workers": None,
        "restart_workers": False,
        "heartbeat_timeout": 2.5,
        "asynchronous": False,
        "segments_in_flight": 2,
        "max_staleness": None,
    }
    assert load_config(write(tmp_path, config.to_dict(), "resolved.yaml")).to_dict() == config.to_dict()
    assert load_config(path, ["placement=cooperative"]).placement.options == CooperativeOptions()
    assert load_config(path).placement.options == ThreadsOptions()
    assert error_of(path, ["placement.heartbeat_timeout=2.5"]) == (
        "placement.heartbeat_timeout: unknown key for placement 'threads'; it takes none"
    )
    assert error_of(path, ["placement.name=processes", "placement.worker=2"]) == (
        "placement.worker: unknown key for placement 'processes'; did you mean 'workers'?"
    )
    assert error_of(path, ["placement.name=processes", "placement.workers=0"]) == (
        f"placement.workers: expected an integer in [1, {MAX_PROCESSES}], got 0"
    )
    assert error_of(path, ["placement.name=processes", "placement.heartbeat_timeout=.inf"]) == (
        "placement.heartbeat_timeout: expected a finite number, got inf"
    )
    assert error_of(path, ["placement=fibers"]).startswith("placement.name: expected one of ['threads', 'cooperative'")


def test_the_placement_keys_of_before_the_block_still_load_with_a_deprecation_warning(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    warned = "config key heartbeat_timeout is deprecated since parl .*: use placement.heartbeat_timeout"
    with pytest.warns(DeprecationWarning, match=warned):
        config = load_config(path, ["placement=processes", "heartbeat_timeout=2.5"])
    assert config.placement.options.heartbeat_timeout == 2.5
    with pytest.warns(DeprecationWarning) as caught:
        config = load_config(path, ["placement=processes", "workers=2", "faults.restart_workers=true"])
    old_keys = {str(w.message).split(" is deprecated")[0] for w in caught}
    assert old_keys == {"config key workers", "config key faults.restart_workers"}
    assert config.placement.options == ProcessesOptions(workers=2, restart_workers=True)
    assert error_of(path, ["placement=processes", "workers=3", "placement.workers=2"]) == (
        "workers: placement.workers is set too; keep that one (workers is deprecated)"
    )
    assert error_of(path, ["heartbeat_timeout=2.5"]).startswith(
        "heartbeat_timeout: heartbeat_timeout applies to placement 'processes' only"
    )
    assert error_of(path, ["workers=2"]).startswith("workers: workers applies to placement 'processes' or 'ray' only")
    assert error_of(path, ["ray.replay_shards=2"]).startswith("ray: ray applies to placement 'ray' only")
