"""PolicyGradient and A2C: returns over segments, the loss and its gradients, heads, recurrent unrolls, options.

The models are linear (no hidden layer) with known weights, so every cost can
be recomputed in numpy from a direct sum over each segment's rewards.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import gymnasium as gym
import numpy as np
import paddle
import pytest

import parl
from parl.algorithms.a2c import A2C
from parl.algorithms.policy_gradient import PolicyGradient
from parl.layers.optimizer import Adam, RMSProp
from parl.models import LSTMActorCritic, MLPActorCritic
from parl.utils import GymAgent

from toys import LINEAR_WEIGHTS, columns_batch, linear_actor_critic, log_softmax, simple_batch

GAMMA = 0.9
LENGTHS = [4, 3, 5]  # three segments, 12 rows
N = sum(LENGTHS)
WEIGHTS = LINEAR_WEIGHTS


def make_batch(ends_at_last_row: Sequence[float], seed: int = 0) -> Dict[str, np.ndarray]:
    """Segments of consecutive steps: within a segment each next observation is the following row's."""
    rng = np.random.default_rng(seed)
    obs, next_obs, ends = [], [], []
    for length, end in zip(LENGTHS, ends_at_last_row):
        walk = rng.standard_normal((length + 1, 2)).astype(np.float32)
        obs.append(walk[:-1])
        next_obs.append(walk[1:])
        ends.append(np.eye(1, length, length - 1, dtype=np.float32).reshape(-1, 1) * end)
    return {
        "obs": np.concatenate(obs),
        "next_obs": np.concatenate(next_obs),
        "action": rng.integers(0, 2, (N, 1)).astype(np.int64),
        "reward": rng.standard_normal((N, 1)).astype(np.float32),
        "end": np.concatenate(ends),
    }


# -- numpy reference ----------------------------------------------------------------------


def value_of(obs: np.ndarray) -> np.ndarray:
    return (obs @ WEIGHTS["critic.w"] + WEIGHTS["critic.b"]).reshape(-1)


def reference_returns(b: Dict[str, np.ndarray], lam: float) -> np.ndarray:
    """``A_t + V(s_t)`` with ``A_t = sum_k (gamma lam)^k delta_{t+k}`` summed directly within each segment.

    With lam = 1 this is the discounted reward sum to the segment's end plus the discounted value of
    its last next observation (when that step did not terminate).
    """
    v, nv = value_of(b["obs"]), value_of(b["next_obs"])
    r, end = b["reward"].reshape(-1), b["end"].reshape(-1)
    delta = r + GAMMA * (1.0 - end) * nv - v
    out, start = np.zeros(N), 0
    for length in LENGTHS:
        for t in range(start, start + length):
            k = np.arange(t, start + length)
            out[t] = np.sum((GAMMA * lam) ** (k - t) * delta[k]) + v[t]
        start += length
    return out


def monte_carlo_returns(b: Dict[str, np.ndarray]) -> np.ndarray:
    """Discounted rewards to each segment's end, plus the bootstrap when the last step did not terminate."""
    r, nv, end = b["reward"].reshape(-1), value_of(b["next_obs"]), b["end"].reshape(-1)
    out, start = np.zeros(N), 0
    for length in LENGTHS:
        last = start + length - 1
        running = (1.0 - end[last]) * nv[last]
        for t in range(last, start - 1, -1):
            running = r[t] + GAMMA * running
            out[t] = running
        start += length
    return out


def reference_costs(
    b: Dict[str, np.ndarray], *, lam: float, value_coef: float, entropy_coef: float, normalize: bool
) -> Dict[str, float]:
    log_p = log_softmax(b["obs"] @ WEIGHTS["logits.w"] + WEIGHTS["logits.b"])
    taken = np.take_along_axis(log_p, b["action"], axis=1).reshape(-1)
    returns = reference_returns(b, lam)
    v = value_of(b["obs"])
    adv = returns - v
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    policy_loss = -np.mean(taken * adv)
    value_loss = np.mean((returns - v) ** 2)
    entropy = np.mean(-(np.exp(log_p) * log_p).sum(axis=1))
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    return {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}


# -- helpers ----------------------------------------------------------------------------------


def known(algorithm_class, **options):
    algorithm = algorithm_class(linear_actor_critic, gamma=GAMMA, **options)
    algorithm.model.set_weights(WEIGHTS)
    return algorithm


def learn(algorithm, b: Dict[str, np.ndarray], states=None, next_states=None, lengths=LENGTHS):
    batch = columns_batch(b, states=states, next_states=next_states, sequence_lengths=lengths)
    return algorithm.learn(batch.to_tensors())


def assert_costs(costs: Dict[str, paddle.Tensor], expected: Dict[str, float]) -> None:
    assert sorted(costs) == ["entropy", "loss", "policy_loss", "value_loss"]
    for name, value in expected.items():
        assert float(costs[name]) == pytest.approx(value, rel=1e-5, abs=1e-6), name


# -- the data -----------------------------------------------------------------------------------


def test_the_reference_monte_carlo_returns_agree_with_the_direct_sum() -> None:
    """Guards the references: lam = 1 telescopes to the discounted rewards plus the final bootstrap."""
    for ends in ([1.0, 0.0, 0.0], [0.0, 1.0, 1.0]):
        b = make_batch(ends)
        np.testing.assert_allclose(reference_returns(b, 1.0), monte_carlo_returns(b), rtol=1e-5, atol=1e-6)
    # The bootstrap matters: a terminated and a truncated last step give different returns.
    assert not np.allclose(monte_carlo_returns(make_batch([1.0, 1.0, 1.0])), monte_carlo_returns(make_batch([0.0] * 3)))


# -- PolicyGradient -----------------------------------------------------------------------------


@pytest.mark.parametrize("ends", [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], ids=["mixed", "cut", "ended"])
@pytest.mark.parametrize("normalize", [True, False])
def test_policy_gradient_costs_use_monte_carlo_returns_of_each_segment(ends, normalize) -> None:
    b = make_batch(ends)
    pg = known(PolicyGradient, value_coef=0.7, entropy_coef=0.05, normalize_advantages=normalize)
    expected = reference_costs(b, lam=1.0, value_coef=0.7, entropy_coef=0.05, normalize=normalize)
    assert_costs(learn(pg, b), expected)


def test_policy_gradient_gradients_are_reinforce_plus_the_baseline_regression() -> None:
    """The advantage carries no gradient: the policy term moves only the actor, the value term only the critic."""
    b = make_batch([1.0, 0.0, 0.0])
    pg = known(PolicyGradient, value_coef=0.25, normalize_advantages=False)
    learn(pg, b)["loss"].backward()
    grads = {path: layer.params for path, layer in pg.model.named_layers()}

    probs = np.exp(log_softmax(b["obs"] @ WEIGHTS["logits.w"] + WEIGHTS["logits.b"]))
    returns = monte_carlo_returns(b)
    v = value_of(b["obs"])
    adv = returns - v
    # d(-mean(adv * log pi(a)))/d logits = -adv * (onehot(a) - pi) / N
    d_logits = -(np.eye(2)[b["action"].reshape(-1)] - probs) * adv[:, None] / N
    np.testing.assert_allclose(grads["logits"]["w"].grad.numpy(), b["obs"].T @ d_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["logits"]["b"].grad.numpy(), d_logits.sum(axis=0), rtol=1e-4, atol=1e-6)
    # d(0.25 * mean((G - V)^2))/dV = -0.5 * (G - V) / N
    d_value = (-0.5 * (returns - v) / N)[:, None]
    np.testing.assert_allclose(grads["critic"]["w"].grad.numpy(), b["obs"].T @ d_value, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["critic"]["b"].grad.numpy(), d_value.sum(axis=0), rtol=1e-4, atol=1e-6)


def test_a_policy_gradient_step_makes_actions_with_positive_advantage_likelier() -> None:
    parl.seed_everything(0)
    task = parl.ComputationTask("RL", PolicyGradient(linear_actor_critic, gamma=GAMMA, learning_rate=0.05))
    obs = np.tile(np.array([[1.0, -1.0]], np.float32), (4, 1))
    # One episode: action 1 is followed by reward, action 0 is not; the baseline (normalized) splits them.
    batch = parl.Transition(
        inputs={"obs": obs},
        next_inputs={"obs": obs},
        states={},
        next_states={},
        actions={"action": np.array([[0], [1], [0], [1]], np.int64)},
        rewards={"reward": np.array([[0.0], [1.0], [0.0], [1.0]], np.float32)},
        next_episode_end=np.array([[0.0], [0.0], [0.0], [1.0]], np.float32),
        sequence_lengths=(4,),
    )

    def prob_of_1() -> float:
        with paddle.no_grad():
            dist, _, _ = task.algorithm.model.step({"obs": paddle.to_tensor(obs[:1])}, {})
        return float(np.exp(dist.log_probs.numpy()[0, 1]))

    before = prob_of_1()
    costs = task.learn(batch)
    assert set(costs) == {"loss", "policy_loss", "value_loss", "entropy"}
    assert prob_of_1() > before


# -- A2C --------------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [1.0, 0.8, 0.0])
def test_a2c_costs_use_n_step_or_gae_returns(lam) -> None:
    b = make_batch([0.0, 1.0, 0.0], seed=3)
    a2c = known(A2C, gae_lambda=lam, value_coef=0.5, entropy_coef=0.01)
    expected = reference_costs(b, lam=lam, value_coef=0.5, entropy_coef=0.01, normalize=False)
    assert_costs(learn(a2c, b), expected)


def test_a2c_with_lambda_one_is_policy_gradient_on_the_same_segments() -> None:
    b = make_batch([0.0, 1.0, 0.0], seed=4)
    options = dict(value_coef=0.5, entropy_coef=0.01, normalize_advantages=False)
    a2c, pg = learn(known(A2C, **options), b), learn(known(PolicyGradient, **options), b)
    for name in a2c:
        assert float(a2c[name]) == pytest.approx(float(pg[name]), rel=1e-6)


def test_a2c_optimizer_is_rmsprop_by_default_or_adam_and_clips() -> None:
    params = linear_model_params()
    rmsprop = A2C(linear_actor_critic).make_optimizer(params)
    assert type(rmsprop) is RMSProp and rmsprop.grad_clip == 0.5 and rmsprop.alpha == 0.99
    assert rmsprop.epsilon == 1e-5 and rmsprop.get_lr() == pytest.approx(7e-4)
    custom = A2C(linear_actor_critic, rmsprop_alpha=0.9, rmsprop_epsilon=1e-3, grad_clip=None).make_optimizer(params)
    assert custom.alpha == 0.9 and custom.epsilon == 1e-3 and custom.grad_clip is None
    adam = A2C(linear_actor_critic, optimizer="adam", learning_rate=1e-3, grad_clip=2.0).make_optimizer(params)
    assert type(adam) is Adam and adam.grad_clip == 2.0 and adam.get_lr() == pytest.approx(1e-3)


def linear_model_params() -> List[paddle.Tensor]:
    model = linear_actor_critic()
    model.step({"obs": paddle.zeros([1, 2])}, {})
    return model.parameters()


def test_a2c_trains_through_a_task_with_rmsprop() -> None:
    b = make_batch([0.0, 1.0, 0.0], seed=5)
    task = parl.ComputationTask("RL", known(A2C, learning_rate=0.01))
    batch = columns_batch(b, sequence_lengths=LENGTHS)
    first = task.learn(batch)
    expected = reference_costs(b, lam=1.0, value_coef=0.5, entropy_coef=0.01, normalize=False)
    assert first["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert isinstance(task._optimizer, RMSProp)
    losses = [task.learn(batch)["loss"] for _ in range(30)]
    assert losses[-1] < first["loss"]  # the same batch again and again: the loss falls


def test_a2c_with_a_gaussian_head() -> None:
    """Continuous actions: the log-density and entropy of the model's diagonal Gaussian."""
    weights = {
        "mean.w": np.array([[0.4, -0.1], [0.2, 0.3]], np.float32),
        "mean.b": np.array([0.1, 0.0], np.float32),
        "sigma.w": np.array([[0.1, 0.2], [-0.3, 0.1]], np.float32),
        "sigma.b": np.array([-0.5, 0.2], np.float32),
        "critic.w": WEIGHTS["critic.w"],
        "critic.b": WEIGHTS["critic.b"],
    }
    a2c = A2C(lambda: MLPActorCritic(obs_dim=2, action_dim=2, hidden_sizes=()), gamma=GAMMA, entropy_coef=0.1)
    a2c.model.set_weights(weights)
    b = make_batch([1.0, 0.0, 0.0], seed=6)
    actions = np.random.default_rng(6).uniform(-1, 1, (N, 2)).astype(np.float32)
    batch = simple_batch(b["obs"], actions, b["reward"], b["next_obs"], b["end"], sequence_lengths=LENGTHS)
    costs = a2c.learn(batch.to_tensors())
    mean = b["obs"] @ weights["mean.w"] + weights["mean.b"]
    std = np.log1p(np.exp(b["obs"] @ weights["sigma.w"] + weights["sigma.b"])) + 1e-3
    log_p = (-0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(axis=1)
    entropy = (np.log(std) + 0.5 + 0.5 * np.log(2 * np.pi)).sum(axis=1).mean()
    returns = monte_carlo_returns(b)
    v = value_of(b["obs"])
    policy_loss = -np.mean(log_p * (returns - v))
    value_loss = np.mean((returns - v) ** 2)
    assert_costs(
        costs,
        {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "loss": policy_loss + 0.5 * value_loss - 0.1 * entropy,
        },
    )


def test_a2c_unrolls_a_recurrent_model_over_each_segment_from_its_stored_state() -> None:
    """The costs equal those of stepping the LSTM row by row, restarting each segment at its stored state."""
    parl.seed_everything(7)
    hidden = 3
    a2c = A2C(lambda: LSTMActorCritic(obs_dim=2, num_actions=2, hidden_size=hidden), gamma=GAMMA, entropy_coef=0.02)
    b = make_batch([0.0, 1.0, 0.0], seed=7)
    rng = np.random.default_rng(7)
    starts = np.cumsum([0] + LENGTHS[:-1])
    # Stored states: each segment's first row holds a nonzero memory; later rows hold what stepping gave.
    states = {"h": np.zeros((N, hidden), np.float32), "c": np.zeros((N, hidden), np.float32)}
    next_states = {"h": np.zeros((N, hidden), np.float32), "c": np.zeros((N, hidden), np.float32)}
    log_p, values, entropy, returns = np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N)
    t = paddle.to_tensor
    with paddle.no_grad():
        for start, length in zip(starts, LENGTHS):
            state = {k: t(rng.standard_normal((1, hidden)).astype(np.float32)) for k in ("h", "c")}
            for row in range(start, start + length):
                for k in state:
                    states[k][row] = state[k].numpy()[0]
                dist, value, state = a2c.model.step({"obs": t(b["obs"][row : row + 1])}, state)
                for k in state:
                    next_states[k][row] = state[k].numpy()[0]
                log_p[row] = dist.log_prob(t(b["action"][row : row + 1])).numpy()[0, 0]
                entropy[row] = dist.entropy().numpy()[0, 0]
                values[row] = value.numpy()[0, 0]
            _, last_value, _ = a2c.model.step({"obs": t(b["next_obs"][row : row + 1])}, state)
            bootstrap = (1.0 - b["end"][row, 0]) * last_value.numpy()[0, 0]
            running = bootstrap
            for r in range(start + length - 1, start - 1, -1):
                running = b["reward"][r, 0] + GAMMA * running
                returns[r] = running
    adv = returns - values
    policy_loss = -np.mean(log_p * adv)
    value_loss = np.mean(adv**2)
    expected = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy.mean(),
        "loss": policy_loss + 0.5 * value_loss - 0.02 * entropy.mean(),
    }
    assert_costs(learn(a2c, b, states, next_states), expected)
    # Zeroing the stored first states changes the costs: the unroll does start from them.
    zeroed = {k: v.copy() for k, v in states.items()}
    for k in zeroed:
        zeroed[k][starts] = 0.0
    assert float(learn(a2c, b, zeroed, next_states)["loss"]) != pytest.approx(expected["loss"], rel=1e-4)


class _RecordingProxy:
    """Stands between a helper and its communicator and keeps every training batch sent."""

    def __init__(self, communicator) -> None:
        self._communicator = communicator
        self.batches: List[Dict[str, object]] = []

    def __getattr__(self, name):
        return getattr(self._communicator, name)

    def learn(self, batch):
        self.batches.append(batch)
        return self._communicator.learn(batch)


def test_lstm_memory_flows_from_acting_into_the_segments_sent_for_learning() -> None:
    parl.seed_everything(0)
    func = parl.create_algorithm_func(
        LSTMActorCritic, dict(obs_dim=4, num_actions=2, hidden_size=8), A2C, dict(learning_rate=1e-3)
    )
    manager = parl.Manager({"RL": parl.TaskSettings(func)}, thread_placement="os")
    helper = parl.OnPolicyHelper(sample_interval=5)
    manager.add_agent(GymAgent(gym.make("CartPole-v1"), seed=0, num_games=3), {"RL": helper})
    proxy = _RecordingProxy(helper.communicator)
    helper._comm = proxy
    manager.start()
    manager.join(timeout=60)
    manager.stop()
    assert manager.errors == []
    assert manager.tasks["RL"].update_steps == len(proxy.batches) > 3
    episode_start = True
    for batch in proxy.batches:
        h, next_h = batch.states["h"], batch.next_states["h"]
        assert batch.sequence_lengths == (len(h),)
        # Memory starts at zero with each episode and is carried from step to step.
        assert np.all(h[0] == 0.0) == episode_start
        np.testing.assert_array_equal(h[1:], next_h[:-1])
        episode_start = bool(batch.next_episode_end[-1, 0] == 1.0) or len(h) < 5
        assert np.isfinite(list(manager.tasks["RL"].learn(batch).values())).all()


# -- options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "algorithm_class, option, value",
    [
        (PolicyGradient, "gamma", 1.5),
        (PolicyGradient, "learning_rate", 0.0),
        (PolicyGradient, "value_coef", -1.0),
        (PolicyGradient, "entropy_coef", -0.1),
        (PolicyGradient, "grad_clip", -1.0),
        (A2C, "gae_lambda", 1.2),
        (A2C, "optimizer", "sgd"),
        (A2C, "rmsprop_alpha", 2.0),
        (A2C, "rmsprop_epsilon", 0.0),
        (A2C, "entropy_coef", -0.01),
    ],
)
def test_bad_options_raise_naming_them(algorithm_class, option, value) -> None:
    with pytest.raises(ValueError, match=f"{option}.*{value!r}"):
        algorithm_class(linear_actor_critic, **{option: value})


@pytest.mark.parametrize("algorithm_class", [PolicyGradient, A2C])
def test_unknown_options_and_models_without_an_actor_critic_raise(algorithm_class) -> None:
    with pytest.raises(ValueError, match="lambda_"):
        algorithm_class(linear_actor_critic, lambda_=0.9)
    from parl.models import MLPQModel

    with pytest.raises(ValueError, match="ActorCriticModel.*MLPQModel"):
        algorithm_class(lambda: MLPQModel(obs_dim=2, num_actions=2))
