"""DQN: targets on termination vs truncation, Double-DQN action choice, dueling heads, settings."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import parl
from parl.algorithms import DQN
from parl.models import MLPQModel

from toys import RecordingCommunicator, simple_batch

GAMMA = 0.9
# A linear Q-network (no hidden layer) with known online and target weights.
ONLINE = {"q.w": np.array([[1.0, -1.0], [0.5, 2.0]], np.float32), "q.b": np.array([0.0, 0.1], np.float32)}
TARGET = {"q.w": np.array([[0.2, 0.8], [-1.0, 0.3]], np.float32), "q.b": np.array([0.5, -0.5], np.float32)}

OBS = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
NEXT_OBS = np.array([[1.0, 1.0], [2.0, -1.0]], np.float32)
ACTIONS = np.array([[0], [1]], np.int64)
REWARDS = np.array([[1.0], [-0.5]], np.float32)


def linear_q(weights: dict, obs: np.ndarray) -> np.ndarray:
    return obs @ weights["q.w"] + weights["q.b"]


def expected_loss(obs, next_obs, actions, rewards, ends, *, double_q: bool, loss: str) -> float:
    """The DQN loss computed in numpy from the known weights."""
    q_taken = np.take_along_axis(linear_q(ONLINE, obs), actions, axis=1)
    next_q_target = linear_q(TARGET, next_obs)
    chooser = linear_q(ONLINE, next_obs) if double_q else next_q_target
    next_value = np.take_along_axis(next_q_target, chooser.argmax(axis=1)[:, None], axis=1)
    target = rewards + GAMMA * (1.0 - ends) * next_value
    d = q_taken - target
    if loss == "mse":
        return float(np.mean(d**2))
    return float(np.mean(np.where(np.abs(d) < 1.0, 0.5 * d**2, np.abs(d) - 0.5)))


def known_dqn(**kwargs) -> DQN:
    dqn = DQN(lambda: MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=()), gamma=GAMMA, **kwargs)
    dqn.model.set_weights(ONLINE)
    dqn.target_model.set_weights(TARGET)
    return dqn


def dqn_loss(dqn: DQN, ends: np.ndarray, obs=OBS, next_obs=NEXT_OBS, actions=ACTIONS, rewards=REWARDS) -> float:
    costs = dqn.learn(simple_batch(obs, actions, rewards, next_obs, ends).to_tensors())
    return float(costs["loss"])


def test_the_known_weights_make_the_cases_distinguishable() -> None:
    """Guards the test data: the online and target networks pick different next actions in row 0."""
    assert linear_q(ONLINE, NEXT_OBS)[0].argmax() != linear_q(TARGET, NEXT_OBS)[0].argmax()
    kwargs = dict(double_q=True, loss="mse")
    losses = {
        end: expected_loss(OBS, NEXT_OBS, ACTIONS, REWARDS, np.full((2, 1), end, np.float32), **kwargs)
        for end in (0.0, 1.0)
    }
    assert abs(losses[0.0] - losses[1.0]) > 0.1
    double = expected_loss(OBS, NEXT_OBS, ACTIONS, REWARDS, np.zeros((2, 1), np.float32), double_q=True, loss="mse")
    single = expected_loss(OBS, NEXT_OBS, ACTIONS, REWARDS, np.zeros((2, 1), np.float32), double_q=False, loss="mse")
    assert abs(double - single) > 0.1


@pytest.mark.parametrize("double_q", [True, False])
@pytest.mark.parametrize("loss", ["mse", "huber"])
@pytest.mark.parametrize(
    "ends", [[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]], ids=["truncated", "terminated", "mixed-10", "mixed-01"]
)
def test_target_bootstraps_only_where_the_episode_did_not_terminate(double_q, loss, ends) -> None:
    ends = np.array(ends, np.float32)[:, None]
    dqn = known_dqn(double_q=double_q, loss=loss)
    expected = expected_loss(OBS, NEXT_OBS, ACTIONS, REWARDS, ends, double_q=double_q, loss=loss)
    assert dqn_loss(dqn, ends) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_the_first_update_keeps_a_target_that_already_has_values() -> None:
    dqn = known_dqn(loss="mse")
    dqn_loss(dqn, np.zeros((2, 1), np.float32))
    for key, value in dqn.target_model.get_weights().items():
        np.testing.assert_array_equal(value, TARGET[key])


def test_a_fresh_dqn_starts_its_target_as_a_copy_of_the_online_model() -> None:
    dqn = DQN(lambda: MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=(4,)), gamma=GAMMA, loss="mse")
    dqn_loss(dqn, np.zeros((2, 1), np.float32))
    online, target = dqn.model.get_weights(), dqn.target_model.get_weights()
    assert sorted(online) == sorted(target) == ["hidden.0.b", "hidden.0.w", "q.b", "q.w"]
    for key in online:
        np.testing.assert_array_equal(online[key], target[key])
    assert dqn.model.q.params["w"] is not dqn.target_model.q.params["w"]


@pytest.mark.parametrize(
    "terminated, truncated, end",
    [
        (True, False, 1.0),
        (False, True, 0.0),
        (True, True, 1.0),
        (False, False, 0.0),
    ],
)
def test_exp_replay_helper_marks_only_termination_as_an_episode_end(terminated, truncated, end) -> None:
    """From store_data through the batch the helper sends to DQN's loss."""
    helper = parl.ExpReplayHelper(batch_size=2, warmup_steps=1, seed=0)
    comm = RecordingCommunicator(MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=()))
    helper.bind(comm)
    helper.store_data(
        {"obs": OBS[0]}, {"action": ACTIONS[0]}, float(REWARDS[0, 0]), {"obs": NEXT_OBS[0]}, terminated, truncated
    )
    assert helper.learn() is not None
    batch = comm.batches[0]
    np.testing.assert_array_equal(batch.next_episode_end, [[end], [end]])

    task = parl.ComputationTask("RL", known_dqn(loss="mse"))
    costs = task.learn(batch)
    ends = np.full((2, 1), end, np.float32)
    expected = expected_loss(
        OBS[[0, 0]], NEXT_OBS[[0, 0]], ACTIONS[[0, 0]], REWARDS[[0, 0]], ends, double_q=True, loss="mse"
    )
    assert costs["loss"] == pytest.approx(expected, rel=1e-5, abs=1e-6)


# -- dueling ---------------------------------------------------------------------------


def test_dqn_with_a_dueling_model_predicts_and_learns() -> None:
    func = parl.create_algorithm_func(
        MLPQModel,
        dict(obs_dim=3, num_actions=4, hidden_sizes=(8,), dueling=True),
        DQN,
        dict(gamma=0.9, learning_rate=1e-2, target_update_interval=1000),
    )
    task = parl.ComputationTask("RL", func())
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((6, 3)).astype(np.float32)
    actions, states = task.predict({"obs": obs}, {})
    assert states == {}
    assert actions["action"].shape == (6, 1) and actions["action"].dtype == np.int64

    # The head is V + A - mean(A), and predict is greedy on it.
    model = task.algorithm.model
    w = model.get_weights()
    h = np.maximum(obs @ w["hidden.0.w"] + w["hidden.0.b"], 0.0)
    advantage = h @ w["advantage.w"] + w["advantage.b"]
    value = h @ w["state_value.w"] + w["state_value.b"]
    q = value + advantage - advantage.mean(axis=1, keepdims=True)
    with paddle.no_grad():
        np.testing.assert_allclose(model.value({"obs": paddle.to_tensor(obs)}).numpy(), q, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(actions["action"][:, 0], q.argmax(axis=1))

    batch = parl.Transition(
        inputs={"obs": obs},
        next_inputs={"obs": rng.standard_normal((6, 3)).astype(np.float32)},
        states={},
        next_states={},
        actions={"action": rng.integers(0, 4, (6, 1))},
        rewards={"reward": rng.standard_normal((6, 1)).astype(np.float32)},
        next_episode_end=np.array([[0], [1], [0], [0], [1], [0]], np.float32),
    )
    losses = [task.learn(batch)["loss"] for _ in range(40)]
    assert all(np.isfinite(losses))
    assert task.update_steps == 40
    assert losses[-1] < 0.5 * losses[0]  # the target network is fixed here, so this is plain regression
    assert not np.array_equal(model.get_weights()["state_value.w"], w["state_value.w"])


# -- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(gamma=1.5), ["gamma", "1.5"]),
        (dict(gamma=-0.1), ["gamma", "-0.1"]),
        (dict(learning_rate=-1e-3), ["learning_rate", "-0.001"]),
        (dict(learning_rate=0), ["learning_rate", "0"]),
        (dict(loss="l1"), ["loss", "'l1'", "huber", "mse"]),
        (dict(target_update_interval=0), ["target_update_interval", "0"]),
        (dict(tau=0.0), ["tau", "0.0"]),
        (dict(tau=1.5), ["tau", "1.5"]),
        (dict(grad_clip=-1.0), ["grad_clip", "-1.0"]),
    ],
)
def test_bad_hyperparameters_raise_naming_the_setting_and_value(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        DQN(lambda: MLPQModel(obs_dim=2, num_actions=2), **kwargs)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_bad_model_func_raises() -> None:
    with pytest.raises(ValueError, match="model_func"):
        DQN(MLPQModel(obs_dim=2, num_actions=2))
    with pytest.raises(ValueError, match="must return a parl.Model"):
        DQN(lambda: "not a model")
