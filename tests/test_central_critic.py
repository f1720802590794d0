"""CentralCriticActorCritic: the actor reads ``obs`` only, the critic ``state`` only; a robot config sizes
``state_dim`` from the environment's ``state_space`` and PPO trains it unchanged."""

from __future__ import annotations

import pathlib

import numpy as np
import paddle
import pytest

from parl.core.specs import normalize_specs
from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.train.trainer import Trainer
from parl.models import CentralCriticActorCritic

CONFIG = pathlib.Path(__file__).resolve().parent.parent / "examples" / "configs" / "mappo_simple_spread.yaml"


def rows(count: int, dim: int, seed: int) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32))


def test_specs_name_both_inputs() -> None:
    model = CentralCriticActorCritic(obs_dim=3, state_dim=7, num_actions=4, hidden_sizes=(8,))
    specs = [(s.name, list(s.shape), s.dtype.name) for s in normalize_specs(model.get_input_specs(), "test")]
    assert specs == [("obs", [3], "float32"), ("state", [7], "float32")]


def test_actor_reads_obs_and_critic_reads_state() -> None:
    model = CentralCriticActorCritic(obs_dim=3, state_dim=7, num_actions=4, hidden_sizes=(8, 8))
    obs, state = rows(5, 3, 0), rows(5, 7, 1)
    dist, value, _ = model.step({"obs": obs, "state": state}, {})
    assert dist.logits.shape == [5, 4] and value.shape == [5, 1]
    other_state, _, _ = model.step({"obs": obs, "state": rows(5, 7, 2)}, {})
    np.testing.assert_array_equal(other_state.logits.numpy(), dist.logits.numpy())
    _, value_other_obs, _ = model.step({"obs": rows(5, 3, 3), "state": state}, {})
    np.testing.assert_array_equal(value_other_obs.numpy(), value.numpy())
    _, value_other_state, _ = model.step({"obs": obs, "state": rows(5, 7, 2)}, {})
    assert not np.allclose(value_other_state.numpy(), value.numpy())


def test_compiled_policy_acts_like_step() -> None:
    model = CentralCriticActorCritic(obs_dim=3, state_dim=7, action_dim=2, hidden_sizes=(8,))
    inputs = {"obs": rows(4, 3, 0), "state": rows(4, 7, 1)}
    dist, _, _ = model.step(inputs, {})
    policy = model.compile_policy()
    assert policy is not None
    acting, value, _ = policy(inputs, {})
    assert value is None
    np.testing.assert_allclose(acting.mean.numpy(), dist.mean.numpy(), rtol=1e-6)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_bad_state_dim_is_named(bad: object) -> None:
    with pytest.raises(ValueError, match="state_dim"):
        CentralCriticActorCritic(obs_dim=3, state_dim=bad, num_actions=4)  # type: ignore[arg-type]


def test_config_sizes_state_dim_from_the_environment() -> None:
    config = load_config(CONFIG)
    assert config.tasks["RL"].model_sizes == {"obs_dim": 18, "num_actions": 5, "state_dim": 54}
    two = load_config(CONFIG, ["env.kwargs.N=2"]).tasks["RL"].model_sizes
    assert two["state_dim"] == 2 * two["obs_dim"]  # MPE's state: every agent's observation


def test_stated_state_dim_that_does_not_fit_is_an_error() -> None:
    with pytest.raises(ConfigError, match="state"):
        load_config(CONFIG, ["tasks.RL.model.state_dim=10"])


def test_mappo_config_trains(tmp_path: pathlib.Path) -> None:
    overrides = [f"log_dir={tmp_path}", "agents=2", "train.max_env_steps=200", "evaluation.every_steps=null"]
    result = Trainer(load_config(CONFIG, overrides), progress=False).run()
    assert result["error"] is None
    assert result["updates"]["RL"] >= 1
    assert np.isfinite(result["final_eval"])
