"""MLPActorCritic and LSTMActorCritic (shapes, specs, segments) and ActorCriticBase's advantages."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import paddle
import pytest

from parl.algorithms.actor_critic_base import ActorCriticBase
from parl.core.batch import Transition
from parl.core.specs import normalize_specs
from parl.layers.distributions import Categorical, DiagGaussian
from parl.models import LSTMActorCritic, MLPActorCritic, MLPQModel
from parl.models.actor_critic import MIN_STD


def t(array: np.ndarray) -> paddle.Tensor:
    return paddle.to_tensor(array)


def random_obs(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def spec_tuples(specs) -> list:
    return [(s.name, list(s.shape), s.dtype.name) for s in normalize_specs(specs, "test")]


# -- MLPActorCritic ---------------------------------------------------------------------------


def test_mlp_discrete_shapes_and_specs() -> None:
    model = MLPActorCritic(obs_dim=3, num_actions=4, hidden_sizes=(8,))
    assert spec_tuples(model.get_input_specs()) == [("obs", [3], "float32")]
    assert spec_tuples(model.get_action_specs()) == [("action", [1], "int64")]
    assert model.get_state_specs() == []
    dist, value, next_states = model.step({"obs": t(random_obs(5, 3))}, {})
    assert isinstance(dist, Categorical)
    assert dist.logits.shape == [5, 4]
    assert value.shape == [5, 1]
    assert next_states == {}
    assert dist.sample().shape == [5, 1]


def test_mlp_continuous_shapes_and_specs() -> None:
    model = MLPActorCritic(obs_dim=3, action_dim=2, hidden_sizes=(8, 8))
    assert spec_tuples(model.get_action_specs()) == [("action", [2], "float32")]
    dist, value, next_states = model.step({"obs": t(random_obs(5, 3) * 100)}, {})
    assert isinstance(dist, DiagGaussian)
    assert dist.mean.shape == [5, 2] and dist.std.shape == [5, 2]
    assert float(dist.std.min()) >= MIN_STD
    assert value.shape == [5, 1] and next_states == {}
    assert dist.log_prob(dist.sample()).shape == [5, 1]


def test_mlp_sequence_equals_step_row_by_row() -> None:
    model = MLPActorCritic(obs_dim=3, num_actions=2, hidden_sizes=(8,))
    obs = t(random_obs(6, 3))
    dist, value, _ = model.step({"obs": obs}, {})
    seq_dist, seq_value = model.sequence({"obs": obs}, {}, [2, 4])
    np.testing.assert_allclose(seq_dist.logits.numpy(), dist.logits.numpy(), rtol=1e-6)
    np.testing.assert_allclose(seq_value.numpy(), value.numpy(), rtol=1e-6)


def parameter_count(model) -> int:
    model.step({"obs": t(random_obs(2, model.obs_dim))}, {})
    return sum(int(np.prod(p.shape)) for p in model.parameters())


@pytest.mark.parametrize("num_actions, action_dim, head", [(2, None, 6 * 2 + 2), (None, 2, 2 * (6 * 2 + 2))])
def test_shared_and_separate_trunks_have_the_expected_parameter_counts(num_actions, action_dim, head) -> None:
    trunk = (3 * 8 + 8) + (8 * 6 + 6)
    critic_head = 6 + 1
    kwargs = dict(obs_dim=3, num_actions=num_actions, action_dim=action_dim, hidden_sizes=(8, 6))
    assert parameter_count(MLPActorCritic(**kwargs)) == 2 * trunk + head + critic_head
    assert parameter_count(MLPActorCritic(shared=True, **kwargs)) == trunk + head + critic_head


def test_a_shared_trunk_feeds_both_heads() -> None:
    model = MLPActorCritic(obs_dim=2, num_actions=2, hidden_sizes=(3,), shared=True)
    obs = random_obs(4, 2)
    dist, value, _ = model.step({"obs": t(obs)}, {})
    w = model.get_weights()
    assert not any(key.startswith("critic_hidden") for key in w)
    h = np.tanh(obs @ w["actor_hidden.0.w"] + w["actor_hidden.0.b"])
    np.testing.assert_allclose(dist.logits.numpy(), h @ w["logits.w"] + w["logits.b"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value.numpy(), h @ w["critic.w"] + w["critic.b"], rtol=1e-5, atol=1e-6)


def test_separate_trunks_do_not_share_gradients() -> None:
    model = MLPActorCritic(obs_dim=2, num_actions=2, hidden_sizes=(3,))
    _, value, _ = model.step({"obs": t(random_obs(4, 2))}, {})
    value.sum().backward()
    assert model.actor_hidden[0].params["w"].grad is None or not model.actor_hidden[0].params["w"].grad.numpy().any()
    assert model.critic_hidden[0].params["w"].grad.numpy().any()


@pytest.mark.parametrize("model_class", [MLPActorCritic, LSTMActorCritic])
@pytest.mark.parametrize("kwargs", [dict(), dict(num_actions=2, action_dim=2)], ids=["neither", "both"])
def test_exactly_one_of_num_actions_and_action_dim(model_class, kwargs) -> None:
    with pytest.raises(ValueError) as info:
        model_class(obs_dim=3, **kwargs)
    assert "num_actions" in str(info.value) and "action_dim" in str(info.value)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(obs_dim=0, num_actions=2), "obs_dim"),
        (dict(obs_dim=2, num_actions=1), "num_actions"),
        (dict(obs_dim=2, action_dim=0), "action_dim"),
        (dict(obs_dim=2, num_actions=2, hidden_sizes=(0,)), "hidden_sizes"),
    ],
)
def test_bad_sizes_raise_naming_them(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        MLPActorCritic(**kwargs)


# -- LSTMActorCritic --------------------------------------------------------------------------

HIDDEN = 5


def lstm_model(**kwargs) -> LSTMActorCritic:
    return LSTMActorCritic(obs_dim=3, hidden_size=HIDDEN, **{"num_actions": 3, **kwargs})


def random_states(rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(-1, 1, (rows, HIDDEN)).astype(np.float32) for k in ("h", "c")}


def step_through_segments(model: LSTMActorCritic, obs: np.ndarray, states: dict, lengths: Sequence[int]):
    """The reference: each segment stepped row by row from the state stored with its first row."""
    heads, values = [], []
    start = 0
    for n in lengths:
        h, c = t(states["h"][start : start + 1]), t(states["c"][start : start + 1])
        for row in range(start, start + n):
            dist, value, next_states = model.step({"obs": t(obs[row : row + 1])}, {"h": h, "c": c})
            heads.append((dist.logits if model.discrete else dist.mean).numpy())
            values.append(value.numpy())
            h, c = next_states["h"], next_states["c"]
        start += n
    return np.concatenate(heads), np.concatenate(values)


def test_lstm_specs_and_step_shapes() -> None:
    model = lstm_model()
    assert spec_tuples(model.get_state_specs()) == [("h", [HIDDEN], "float32"), ("c", [HIDDEN], "float32")]
    assert spec_tuples(model.get_action_specs()) == [("action", [1], "int64")]
    states = random_states(4, 0)
    dist, value, next_states = model.step({"obs": t(random_obs(4, 3))}, {k: t(v) for k, v in states.items()})
    assert dist.logits.shape == [4, 3] and value.shape == [4, 1]
    assert sorted(next_states) == ["c", "h"]
    assert next_states["h"].shape == [4, HIDDEN] and next_states["c"].shape == [4, HIDDEN]
    assert not np.allclose(next_states["h"].numpy(), states["h"])


@pytest.mark.parametrize(
    "lengths", [[3, 1, 5, 2], [1, 1, 1], [6], [2, 7, 1, 1, 4]], ids=["mixed", "ones", "one-segment", "longer"]
)
@pytest.mark.parametrize("discrete", [True, False])
def test_lstm_sequence_equals_stepping_each_segment_from_its_first_state(lengths, discrete) -> None:
    model = lstm_model() if discrete else lstm_model(num_actions=None, action_dim=2)
    rows = sum(lengths)
    obs = random_obs(rows, 3, seed=rows)
    # Every row carries a stored state; only each segment's first one may be used.
    states = random_states(rows, seed=rows + 1)
    expected_heads, expected_values = step_through_segments(model, obs, states, lengths)
    dist, value = model.sequence({"obs": t(obs)}, {k: t(v) for k, v in states.items()}, lengths)
    head = dist.logits if discrete else dist.mean
    assert head.shape == [rows, 3 if discrete else 2] and value.shape == [rows, 1]
    np.testing.assert_allclose(head.numpy(), expected_heads, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value.numpy(), expected_values, rtol=1e-5, atol=1e-6)


def test_lstm_sequence_ignores_the_states_stored_with_later_rows() -> None:
    model = lstm_model()
    lengths = [3, 2]
    obs = random_obs(5, 3, seed=1)
    states = random_states(5, seed=2)
    _, value = model.sequence({"obs": t(obs)}, {k: t(v) for k, v in states.items()}, lengths)
    scrambled = {k: v.copy() for k, v in states.items()}
    for k in scrambled:
        scrambled[k][[1, 2, 4]] = 9.0
    _, value_scrambled = model.sequence({"obs": t(obs)}, {k: t(v) for k, v in scrambled.items()}, lengths)
    np.testing.assert_array_equal(value.numpy(), value_scrambled.numpy())


def test_gradients_reach_the_lstm_weights_through_sequence() -> None:
    model = lstm_model()
    lengths = [3, 1, 4]
    obs = random_obs(8, 3, seed=3)
    states = {k: t(v) for k, v in random_states(8, seed=4).items()}
    dist, value = model.sequence({"obs": t(obs)}, states, lengths)
    actions = t(np.random.default_rng(5).integers(0, 3, (8, 1)))
    (value.sum() + dist.log_prob(actions).sum()).backward()
    for layer in (model.cell, model.embed, model.logits, model.critic):
        for suffix, param in layer.params.items():
            assert param.grad is not None, f"{layer.name}.{suffix} got no gradient"
            grad = param.grad.numpy()
            assert np.all(np.isfinite(grad)) and np.abs(grad).sum() > 0, f"{layer.name}.{suffix}"


def test_a_later_step_of_a_segment_sends_gradient_through_the_recurrence() -> None:
    # The value of a segment's last row depends on that segment's first observation.
    model = lstm_model()
    obs = t(random_obs(4, 3, seed=6))
    obs.stop_gradient = False
    states = {k: t(v) for k, v in random_states(4, seed=7).items()}
    _, value = model.sequence({"obs": obs}, states, [3, 1])
    value[2].sum().backward()
    grad = obs.grad.numpy()
    assert np.abs(grad[0]).sum() > 0 and np.abs(grad[1]).sum() > 0
    assert not grad[3].any()  # another segment


# -- ActorCriticBase.advantages ----------------------------------------------------------------

KNOWN = {
    "logits.w": np.array([[0.5, -0.5], [1.0, 0.0]], np.float32),
    "logits.b": np.array([0.0, 0.2], np.float32),
    "critic.w": np.array([[2.0], [-1.0]], np.float32),
    "critic.b": np.array([0.5], np.float32),
}


def known_base(gamma: float) -> ActorCriticBase:
    algorithm = ActorCriticBase(
        lambda: MLPActorCritic(obs_dim=2, num_actions=2, hidden_sizes=()),
        gamma=gamma,
        learning_rate=1e-3,
        grad_clip=None,
    )
    algorithm.model.set_weights(KNOWN)
    return algorithm


def hand_gae(rewards, values, next_values, ends, lengths, gamma, lam):
    out = np.zeros(len(rewards))
    start = 0
    for n in lengths:
        running = 0.0
        for row in reversed(range(start, start + n)):
            if row == start + n - 1:
                running = 0.0
            delta = rewards[row] + gamma * (1 - ends[row]) * next_values[row] - values[row]
            running = delta + gamma * lam * (1 - ends[row]) * running
            out[row] = running
        start += n
    return out


@pytest.mark.parametrize("lam", [1.0, 0.9, 0.0])
def test_advantages_with_a_known_model_equal_gae_by_hand(lam) -> None:
    gamma = 0.9
    algorithm = known_base(gamma)
    lengths = [3, 1, 2]
    rng = np.random.default_rng(8)
    obs = rng.standard_normal((6, 2)).astype(np.float32)
    # Inside a segment the next input is the following row's input.
    fresh = rng.standard_normal((3, 2)).astype(np.float32)
    next_obs = np.concatenate([obs[1:3], fresh[0:1], fresh[1:2], obs[5:6], fresh[2:3]])
    rewards = rng.standard_normal((6, 1)).astype(np.float32)
    ends = np.array([[0], [0], [1], [0], [0], [1]], np.float32)
    critic = lambda x: (x @ KNOWN["critic.w"] + KNOWN["critic.b"])[:, 0]  # noqa: E731
    values, next_values = critic(obs), critic(next_obs)

    _, value_t, _ = algorithm.model.step({"obs": t(obs)}, {})
    np.testing.assert_allclose(value_t.numpy()[:, 0], values, rtol=1e-5, atol=1e-6)
    value_t.stop_gradient = False  # as in learn, where values carry gradients
    batch = Transition(
        inputs={"obs": obs},
        actions={"action": np.zeros((6, 1), np.int64)},
        rewards={"reward": rewards},
        next_inputs={"obs": next_obs},
        next_episode_end=ends,
        states={},
        next_states={},
        sequence_lengths=tuple(lengths),
    )
    adv, targets = algorithm.advantages(value_t, batch.to_tensors(), lam)
    expected = hand_gae(rewards[:, 0], values, next_values, ends[:, 0], lengths, gamma, lam)
    assert adv.shape == [6, 1] and targets.shape == [6, 1]
    np.testing.assert_allclose(adv.numpy()[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets.numpy()[:, 0], expected + values, rtol=1e-5, atol=1e-5)
    assert adv.stop_gradient and targets.stop_gradient


def test_predict_samples_or_takes_the_mode() -> None:
    algorithm = known_base(0.9)
    obs = t(np.array([[1.0, 0.0], [0.0, 1.0], [-2.0, 1.0]], np.float32))
    actions, next_states = algorithm.predict({"obs": obs}, {}, deterministic=True)
    logits = obs.numpy() @ KNOWN["logits.w"] + KNOWN["logits.b"]
    np.testing.assert_array_equal(actions["action"].numpy()[:, 0], logits.argmax(axis=1))
    assert next_states == {}
    sampled, _ = algorithm.predict({"obs": obs}, {})
    assert sampled["action"].shape == [3, 1] and sampled["action"].dtype == paddle.int64


def test_actor_critic_base_refuses_other_models() -> None:
    with pytest.raises(ValueError, match="ActorCriticModel"):
        ActorCriticBase(lambda: MLPQModel(obs_dim=2, num_actions=2), gamma=0.9, learning_rate=1e-3, grad_clip=None)
