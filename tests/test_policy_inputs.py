"""Policy.predict takes observations as the environment gives them: a bare array for a single-input
policy, a Dict observation (input name -> array), or the ``{"obs": batch}`` form; each with or
without a batch axis (one sample in, one sample out), and anything that breaks the specs is a
ValueError naming the input, the shape expected and the one given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dict_obs import IMAGE_SHAPE, NUM_ACTIONS, TwoInputQModel, dict_obs

import parl
from parl.algorithms import A2C, DQN
from parl.experiment.policy.export import Policy, export_policy
from parl.models import LSTMActorCritic, MLPQModel
from parl.serving.computation_task import ComputationTask

TESTS = str(Path(__file__).resolve().parent)
NO_TRANSFORMS = {"normalize_inputs": False, "input_clip": 10.0}


def built(task: ComputationTask, obs: dict) -> ComputationTask:
    """``task`` with its layers built (one prediction on ``obs``, a batch)."""
    task.predict(obs, task.initial_states(len(next(iter(obs.values())))), deterministic=True)
    return task


@pytest.fixture(scope="module")
def two_input(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    """A DQN over TwoInputQModel, exported and loaded back."""
    task = built(
        ComputationTask("RL", DQN(lambda: TwoInputQModel()), normalize_inputs=False),
        dict_obs(np.random.default_rng(1), batch=2),
    )
    task.algorithm.targets.initialize()  # the target network is built, as one update would
    sections = {
        "RL": {
            "model": {"class": "dict_obs.TwoInputQModel", "num_actions": NUM_ACTIONS},
            "algorithm": {"class": "parl.algorithms.DQN"},
            "transforms": NO_TRANSFORMS,
        }
    }
    directory = export_policy({"RL": task}, sections, str(tmp_path_factory.mktemp("policy") / "two_input"))
    return parl.load_policy(directory, python_path=[TESTS])


@pytest.fixture(scope="module")
def single_input() -> Policy:
    task = ComputationTask("RL", DQN(lambda: MLPQModel(4, 2)), normalize_inputs=False)
    return Policy({"RL": built(task, {"obs": np.zeros((2, 4), np.float32)})}, {})


def test_a_dict_observation_acts_with_or_without_a_batch_axis(two_input: Policy) -> None:
    rng = np.random.default_rng(0)
    batch = dict_obs(rng, batch=5)
    actions, states = two_input.predict(batch)
    assert actions["action"].shape == (5, 1) and states == {}
    for row in range(5):
        one = {key: value[row] for key, value in batch.items()}
        single, _ = two_input.predict(one)
        assert single["action"].shape == (1,)
        np.testing.assert_array_equal(single["action"], actions["action"][row])
    # what an env gives: the uint8 image stays uint8 to the model, a float64 vector is taken as float32
    as_listed = {"image": batch["image"][0].tolist(), "vec": batch["vec"][0].astype(np.float64)}
    single, _ = two_input.predict(as_listed)
    np.testing.assert_array_equal(single["action"], actions["action"][0])


def test_dict_observations_that_break_the_specs_are_named(two_input: Policy) -> None:
    obs = dict_obs(np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"takes inputs \['image', 'vec'\]: missing \['vec'\], unknown \[\]"):
        two_input.predict({"image": obs["image"]})
    with pytest.raises(ValueError, match=r"missing \[\], unknown \['depth'\]"):
        two_input.predict({**obs, "depth": obs["vec"]})
    with pytest.raises(ValueError, match=r"input 'vec': expected shape \[3\], got \[4\]"):
        two_input.predict({**obs, "vec": np.zeros(4, np.float32)})
    with pytest.raises(ValueError, match=r"input 'image': expected shape \[B, 7, 7, 1\], got \[2, 7, 7, 3\]"):
        two_input.predict({"image": np.zeros((2, 7, 7, 3), np.uint8), "vec": np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match=r"input 'vec': expected shape \[3\] or \[B, 3\], got \[1, 2, 3\]"):
        two_input.predict({**obs, "vec": np.zeros((1, 2, 3), np.float32)})
    with pytest.raises(ValueError, match=r"inputs \['image'\] are one sample and inputs \['vec'\] a batch"):
        two_input.predict({"image": obs["image"], "vec": np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match=r"disagree on the batch size: \{'image': 2, 'vec': 3\}"):
        two_input.predict({"image": np.zeros((2,) + IMAGE_SHAPE, np.uint8), "vec": np.zeros((3, 3), np.float32)})
    with pytest.raises(ValueError, match=r"takes inputs \['image', 'vec'\]: give a mapping .* got a bare ndarray"):
        two_input.predict(obs["vec"])


def test_a_bare_array_acts_for_a_single_input_policy(single_input: Policy) -> None:
    batch = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    expected, _ = single_input.predict({"obs": batch})  # the form of 0.1, unchanged
    actions, _ = single_input.predict(batch)
    np.testing.assert_array_equal(actions["action"], expected["action"])
    assert actions["action"].shape == (6, 1)
    one, _ = single_input.predict(batch[2])
    assert one["action"].shape == (1,)
    np.testing.assert_array_equal(one["action"], expected["action"][2])
    one, _ = single_input.predict(batch[2].tolist())  # a list, as some environments give
    np.testing.assert_array_equal(one["action"], expected["action"][2])
    with pytest.raises(ValueError, match=r"input 'obs': expected shape \[4\], got \[5\]"):
        single_input.predict(np.zeros(5, np.float32))


def test_a_recurrent_policy_carries_its_states_for_a_batch_and_for_one_sample() -> None:
    task = ComputationTask("RL", A2C(lambda: LSTMActorCritic(3, num_actions=2, hidden_size=8)), normalize_inputs=False)
    rng = np.random.default_rng(0)
    episode = rng.standard_normal((4, 2, 3)).astype(np.float32)  # 4 steps of a batch of 2
    policy = Policy({"RL": built(task, {"obs": episode[0]})}, {})
    states, one_states = None, None
    for step in episode:
        actions, states = policy.predict(step, states)
        one, one_states = policy.predict(step[1], one_states)
        assert one["action"].shape == (1,) and one_states["h"].shape == (8,)
        np.testing.assert_array_equal(one["action"], actions["action"][1])
        np.testing.assert_allclose(one_states["h"], states["h"][1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(states["h"], 0.0)  # the memory moved
    with pytest.raises(ValueError, match=r"state 'c': expected shape \[8\] for one sample, got \[1, 8\]"):
        policy.predict(episode[0][0], {"h": one_states["h"], "c": one_states["c"][np.newaxis]})
