"""Dict and Tuple observations end to end: sizes from the spaces, the observation-to-inputs mapping of
GymAgent, the spec check, the multi-input models and every algorithm built from a config over them,
replay (uniform, prioritized, n-step, frame store) and checkpoints with two inputs."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Dict, List

import gymnasium as gym
import numpy as np
import paddle
import pytest
import yaml

import parl
from parl.experiment.config.class_spec import ConfigError
from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer
from parl.layers.compiled import plain
from parl.models import MLPQModel, MultiInputEncoder, MultiInputQModel
from parl.utils import GymAgent
from parl.utils.observations import observation_mapper
from parl.utils.spaces import observation_sizes, spec_mismatch

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CONFIGS = EXAMPLES / "configs"
sys.path.insert(0, str(EXAMPLES))

from dict_grid_env import DictGridEnv  # noqa: E402

IMAGE_VEC = gym.spaces.Dict(
    {"image": gym.spaces.Box(0, 255, (8, 8, 1), dtype=np.uint8), "vec": gym.spaces.Box(-1.0, 1.0, (3,))}
)


# -- sizes from the spaces -----------------------------------------------------------------------


def test_a_dict_space_gives_shapes_and_dtypes_by_key() -> None:
    assert observation_sizes(IMAGE_VEC) == {
        "observation_shapes": {"image": [8, 8, 1], "vec": [3]},
        "observation_dtypes": {"image": "uint8", "vec": "float32"},
    }


def test_a_tuple_space_gives_obs_0_obs_1() -> None:
    space = gym.spaces.Tuple(
        (gym.spaces.Box(0.0, 1.0, (2,), dtype=np.float64), gym.spaces.Box(0, 1, (1, 4, 4), np.uint8))
    )
    assert observation_sizes(space) == {
        "observation_shapes": {"obs_0": [2], "obs_1": [1, 4, 4]},
        "observation_dtypes": {"obs_0": "float32", "obs_1": "uint8"},
    }


def test_a_part_that_is_not_a_box_is_named() -> None:
    space = gym.spaces.Dict({"vec": gym.spaces.Box(-1.0, 1.0, (3,)), "kind": gym.spaces.Discrete(3)})
    with pytest.raises(ValueError, match="observation 'kind': expected a Box, got Discrete"):
        observation_sizes(space)


# -- the observation-to-inputs mapping ----------------------------------------------------------


def test_the_default_mapping_keeps_a_box_as_today() -> None:
    to_inputs = observation_mapper(gym.spaces.Box(-1.0, 1.0, (3,)))
    out = to_inputs(np.array([1.0, 2.0, 3.0], np.float64))
    assert list(out) == ["obs"] and out["obs"].dtype == np.float32
    frames = np.zeros((4, 84, 84), np.uint8)
    assert observation_mapper(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))(frames)["obs"] is frames


def test_the_default_mapping_of_dict_and_tuple_spaces() -> None:
    out = observation_mapper(IMAGE_VEC)({"image": np.ones((8, 8, 1), np.uint8), "vec": np.zeros(3, np.float64)})
    assert {k: v.dtype for k, v in out.items()} == {"image": np.uint8, "vec": np.float32}
    pair = gym.spaces.Tuple((gym.spaces.Box(0.0, 1.0, (2,)), gym.spaces.Box(0.0, 1.0, (1,))))
    assert sorted(observation_mapper(pair)((np.zeros(2), np.zeros(1)))) == ["obs_0", "obs_1"]


def test_a_missing_key_or_a_non_mapping_observation_is_named() -> None:
    to_inputs = observation_mapper(IMAGE_VEC)
    with pytest.raises(ValueError, match="GymAgent: observation key 'vec' is missing"):
        to_inputs({"image": np.zeros((8, 8, 1), np.uint8)})
    with pytest.raises(ValueError, match="GymAgent: expected a mapping observation with key 'image', got ndarray"):
        to_inputs(np.zeros(3))


class _Recorder(parl.AgentHelper):
    """Acts 0 and keeps every input dict stored."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: List[Dict[str, np.ndarray]] = []

    def predict(self, inputs, states=None):
        return {"action": np.array([0], np.int64)}, {}

    def store_data(self, inputs, actions, reward, next_inputs, terminated, truncated, states=None, next_states=None):
        self.stored.append(inputs)

    def learn(self):
        return None

    def initial_states(self):
        return {}


def _play(agent: GymAgent) -> List[Dict[str, np.ndarray]]:
    recorder = _Recorder()
    agent.helpers["RL"] = recorder
    agent.run_one_episode()
    return recorder.stored


def shifted_inputs(obs: Any) -> Dict[str, np.ndarray]:
    """A mapping of one's own (named by its dotted path in the test below)."""
    return {"grid": np.asarray(obs["image"], np.float32) / 255.0}


class _OwnInputs(GymAgent):
    def observation_inputs(self, obs: Any) -> Dict[str, np.ndarray]:
        return {"goal_only": np.asarray(obs["goal"], np.float32)}


def test_gym_agent_feeds_one_input_per_key_and_takes_a_mapping_of_its_own() -> None:
    stored = _play(GymAgent(DictGridEnv(max_steps=3), seed=1))
    assert stored and {k: v.dtype for k, v in stored[0].items()} == {"image": np.uint8, "goal": np.float32}
    by_path = GymAgent(DictGridEnv(max_steps=3), seed=1, observation_inputs=f"{__name__}.shifted_inputs")
    assert list(_play(by_path)[0]) == ["grid"]
    assert list(_play(_OwnInputs(DictGridEnv(max_steps=3), seed=1))[0]) == ["goal_only"]
    with pytest.raises(ValueError, match="GymAgent observation_inputs: cannot import 'no_such_module.f'"):
        GymAgent(DictGridEnv(), observation_inputs="no_such_module.f")


# -- configs ------------------------------------------------------------------------------------

MODELS = {
    "dqn_dict_obs": ("parl.models.MultiInputQModel", {}),
    "ppo_cartpole": ("parl.models.MultiInputActorCritic", {}),
    "a2c_cartpole": ("parl.models.MultiInputActorCritic", {}),
    "sac_pendulum": ("parl.models.MultiInputGaussianActorCritic", {"continuous": True}),
    "td3_pendulum": ("parl.models.MultiInputDeterministicActorCritic", {"continuous": True}),
}


def dict_config(tmp_path: Path, name: str, changes: Dict[str, Any] = {}) -> str:  # noqa: B006 - read only
    """``examples/configs/<name>.yaml`` on the dict grid with its multi-input model, written under tmp_path."""
    data = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    model_class, env_kwargs = MODELS[name]
    data["python_path"] = [str(EXAMPLES)]
    data["env"] = {"id": "dict_grid_env:DictGrid-v0", "kwargs": {"max_steps": 10, **env_kwargs}}
    model = {"class": model_class, "hidden_sizes": [16], "image_hidden_size": 16, "vector_hidden_sizes": [8]}
    data["tasks"]["RL"]["model"] = model
    data["log_dir"] = str(tmp_path / "runs")
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_algorithm_builds_and_predicts_from_a_config(tmp_path: Path, name: str) -> None:
    config = load_config(dict_config(tmp_path, name))
    task = config.tasks["RL"]
    assert task.model_sizes["observation_shapes"] == {"image": [5, 5, 1], "goal": [2]}
    algorithm = task.algorithm_func()()
    assert dict(algorithm.model.get_input_specs())["image"] == {"shape": [5, 5, 1], "dtype": "uint8"}
    computation = parl.ComputationTask("RL", algorithm)
    env = DictGridEnv(max_steps=10, **MODELS[name][1])
    rows = [observation_mapper(env.observation_space)(env.reset(seed=i)[0]) for i in range(3)]
    inputs = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    states = computation.initial_states(3)
    for deterministic in (False, True):
        actions, _ = computation.predict(inputs, states, deterministic=deterministic)
        assert actions["action"].shape[0] == 3 and np.all(np.isfinite(actions["action"]))


def test_a_stated_shape_that_does_not_fit_is_one_line_naming_the_key(tmp_path: Path) -> None:
    wrong = {"tasks.RL.model.observation_shapes": {"image": [5, 5, 1], "goal": [4]}}
    with pytest.raises(ConfigError) as info:
        load_config(dict_config(tmp_path, "dqn_dict_obs", wrong))
    assert str(info.value) == (
        "tasks.RL.model.observation_shapes: {'image': [5, 5, 1], 'goal': [4]} does not match "
        "env dict_grid_env:DictGrid-v0's observation 'goal' of shape [2]"
    )


def test_spec_mismatch_names_the_key_either_way() -> None:
    discrete = gym.spaces.Discrete(2)
    fits = MultiInputQModel({"image": [8, 8, 1], "vec": [3]}, 2, {"image": "uint8"})
    assert spec_mismatch(fits, IMAGE_VEC, discrete) is None
    wrong = spec_mismatch(
        MultiInputQModel({"image": [8, 8, 1], "vec": [4]}, 2, {"image": "uint8"}), IMAGE_VEC, discrete
    )
    assert (wrong.model_side, wrong.env_side) == ("input 'vec' of shape [4]", "observation 'vec' of shape [3]")
    lacking = spec_mismatch(MultiInputQModel({"image": [8, 8, 1]}, 2, {"image": "uint8"}), IMAGE_VEC, discrete)
    assert lacking.model_side == "inputs ['image'] (no 'vec')"
    extra = MultiInputQModel({"image": [8, 8, 1], "vec": [3], "more": [2]}, 2, {"image": "uint8"})
    assert spec_mismatch(extra, IMAGE_VEC, discrete).env_side == "observation (no 'more'; it has ['image', 'vec'])"
    float_image = MultiInputQModel({"image": [8, 8, 1], "vec": [3]}, 2)
    assert spec_mismatch(float_image, IMAGE_VEC, discrete).model_side == "input 'image' of dtype float32"
    assert spec_mismatch(MLPQModel(3, 2), IMAGE_VEC, discrete).model_side == "inputs ['obs'] (no 'image')"


def test_a_bad_observation_inputs_path_is_an_error_at_its_key(tmp_path: Path) -> None:
    path = dict_config(tmp_path, "dqn_dict_obs", {"agent.observation_inputs": "dict_grid_env.no_such_function"})
    with pytest.raises(
        ConfigError, match=r"^agent\.observation_inputs: cannot import 'dict_grid_env.no_such_function'"
    ):
        load_config(path)
    fine = dict_config(tmp_path, "dqn_dict_obs", {"agent.observation_inputs": "parl.utils.obs_inputs"})
    assert load_config(fine).agent.kwargs["observation_inputs"] == "parl.utils.obs_inputs"


# -- the encoder ---------------------------------------------------------------------------------


def test_the_encoder_reads_hwc_and_chw_images_and_scales_uint8() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (2, 6, 6, 1)).astype(np.uint8)
    vec = paddle.to_tensor(rng.normal(size=(2, 3)).astype(np.float32))
    last = MultiInputEncoder({"image": [6, 6, 1], "vec": [3]}, {"image": "uint8"}, image_hidden_size=8)
    out = last.features(plain)({"image": paddle.to_tensor(image), "vec": vec})
    assert out.shape == [2, 8 + 64] and last.size == 72
    first = MultiInputEncoder({"image": [1, 6, 6], "vec": [3]}, image_hidden_size=8)  # float32 images
    first.features(plain)(first.zero_inputs())
    first.set_weights(last.get_weights())
    chw = paddle.to_tensor(image.transpose(0, 3, 1, 2).astype(np.float32) / 255.0)
    np.testing.assert_allclose(
        first.features(plain)({"image": chw, "vec": vec}).numpy(), out.numpy(), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "shapes, dtypes, words",
    [
        ({}, None, "observation_shapes: expected a mapping"),
        ({"image": [2, 2, 1]}, None, r"observation_shapes.image: \[2, 2, 1\] is too small"),
        ({"vec": [0]}, None, "observation_shapes.vec: expected a list of sizes >= 1"),
        ({"vec": [3]}, {"vec": "int64"}, "observation_dtypes.vec: expected one of"),
        ({"vec": [3]}, {"other": "uint8"}, "observation_dtypes.other: no such input"),
    ],
)
def test_bad_encoder_inputs_are_named(shapes, dtypes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        MultiInputEncoder(shapes, dtypes)


# -- replay and checkpoints ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"tasks.RL.helper.prioritized": True, "tasks.RL.helper.n_step": 3},
        {"env.kwargs.channels_first": True, "tasks.RL.helper.frame_store": True},
    ],
    ids=["uniform", "prioritized-n-step", "frame-store"],
)
def test_replay_trains_and_resumes_with_two_inputs(tmp_path: Path, changes: Dict[str, Any]) -> None:
    base = {
        "train.max_env_steps": 400,
        "train.target_return": None,
        "evaluation.every_steps": None,
        "evaluation.episodes": 2,
        "evaluation.final_episodes": 2,
        "tasks.RL.helper.warmup_steps": 50,
        "agents": 1,
    }
    path = dict_config(tmp_path, "dqn_dict_obs", {**base, **changes})
    trainer = Trainer(load_config(path), progress=False)
    result = trainer.run()
    assert result["updates"]["RL"] > 0
    weights = copy.deepcopy(trainer.manager.tasks["RL"].algorithm.model.get_weights())
    assert any(key.startswith("encoder.image_convs.image") for key in weights)
    loaded: List[Dict[str, np.ndarray]] = []

    def on_start(manager: parl.Manager) -> None:
        loaded.append(copy.deepcopy(manager.tasks["RL"].algorithm.model.get_weights()))

    resumed = Trainer(load_config(path, ["train.max_env_steps=600"]), progress=False, resume=True, on_start=on_start)
    assert resumed.run()["updates"]["RL"] > result["updates"]["RL"]
    assert all(np.array_equal(loaded[0][k], v) for k, v in weights.items())
