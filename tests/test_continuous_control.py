"""DDPG, TD3 and SAC: targets, losses and gradients checked against numpy, and the update schedule.

Linear models (no hidden layer) with known weights make every quantity
computable in numpy; models with hidden layers check that each loss reaches
only its own part of the model.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import paddle
import pytest

import parl
from parl.algorithms.actor_critic_q import ActorCriticQ
from parl.algorithms.ddpg import DDPG
from parl.algorithms.sac import SAC
from parl.algorithms.td3 import TD3
from parl.layers.ensemble_fc import EnsembleFC
from parl.models.continuous import LOG_STD_MAX, LOG_STD_MIN, DeterministicActorCritic, GaussianActorCritic
from parl.utils import GymAgent

from toys import simple_batch

GAMMA = 0.9
OBS_DIM, ACTION_DIM, B = 2, 1, 4
RNG = np.random.default_rng(0)

OBS = RNG.standard_normal((B, OBS_DIM)).astype(np.float32)
NEXT_OBS = RNG.standard_normal((B, OBS_DIM)).astype(np.float32)
ACTIONS = RNG.uniform(-1, 1, (B, ACTION_DIM)).astype(np.float32)
REWARDS = RNG.standard_normal((B, 1)).astype(np.float32)
# Rows 0 and 2 terminated; rows 1 and 3 did not (truncated or mid-episode): they bootstrap.
ENDS = np.array([[1.0], [0.0], [1.0], [0.0]], np.float32)
STEPS = np.array([[1.0], [3.0], [2.0], [1.0]], np.float32)  # n-step replay spans
WEIGHTS = np.array([[0.5], [1.0], [2.0], [0.25]], np.float32)  # prioritized replay importance weights


def critic_weights(members: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "critic.out.w": rng.standard_normal((members, OBS_DIM + ACTION_DIM, 1)).astype(np.float32),
        "critic.out.b": rng.standard_normal((members, 1, 1)).astype(np.float32),
    }


def actor_weights(outputs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "actor.out.w": (0.5 * rng.standard_normal((OBS_DIM, outputs))).astype(np.float32),
        "actor.out.b": (0.1 * rng.standard_normal(outputs)).astype(np.float32),
    }


def q_np(weights: dict, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
    """``[members, B, 1]`` values of a linear critic."""
    x = np.concatenate([obs, action], axis=-1)
    return np.einsum("bi,mio->mbo", x, weights["critic.out.w"]) + weights["critic.out.b"]


def linear_actor_np(weights: dict, obs: np.ndarray) -> np.ndarray:
    return obs @ weights["actor.out.w"] + weights["actor.out.b"]


def call_learn(alg, **row_fields):
    """``alg.learn`` on the batch of the constants (and the row structure ``row_fields``), as tensors."""
    return alg.learn(numpy_batch(**row_fields).to_tensors())


def numpy_batch(**row_fields) -> parl.Transition:
    return simple_batch(OBS, ACTIONS, REWARDS, NEXT_OBS, ENDS, **row_fields)


def deterministic_model(members: int, hidden=()):
    return lambda: DeterministicActorCritic(OBS_DIM, ACTION_DIM, num_critics=members, hidden_sizes=hidden)


def gaussian_model(hidden=()):
    return lambda: GaussianActorCritic(OBS_DIM, ACTION_DIM, num_critics=2, hidden_sizes=hidden)


# -- the twin critics' layer ----------------------------------------------------------


def test_ensemble_fc_computes_each_member_and_frozen_blocks_only_its_weights() -> None:
    layer = EnsembleFC(3, members=2, act="relu")
    x = paddle.to_tensor(RNG.standard_normal((5, 4)).astype(np.float32), stop_gradient=False)
    out = layer(x)
    w, b = layer.params["w"].numpy(), layer.params["b"].numpy()
    assert w.shape == (2, 4, 3) and b.shape == (2, 1, 3) and not np.allclose(w[0], w[1])
    assert np.abs(w).max() <= math.sqrt(6.0 / 7.0)  # each member Glorot-uniform over its own fans
    expected = np.maximum(np.einsum("bi,mio->mbo", x.numpy(), w) + b, 0.0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    # The same values from a 3-D input, one slice per member.
    np.testing.assert_allclose(layer(paddle.stack([x, x])).numpy(), expected, rtol=1e-5, atol=1e-6)

    out.sum().backward()
    grad_w, grad_x = layer.params["w"].grad.numpy().copy(), x.grad.numpy().copy()
    layer.params["w"].clear_gradient(False)
    layer.params["b"].clear_gradient(False)
    x.clear_gradient(False)
    frozen = layer.frozen(x)
    np.testing.assert_allclose(frozen.numpy(), expected, rtol=1e-5, atol=1e-6)
    frozen.sum().backward()
    assert layer.params["w"].grad is None and layer.params["b"].grad is None
    np.testing.assert_allclose(x.grad.numpy(), grad_x, rtol=1e-5)
    assert np.abs(grad_w).sum() > 0
    with pytest.raises(ValueError, match=r"\[2, B, in\]"):
        layer(paddle.zeros([3, 5, 4]))


# -- targets and losses against numpy --------------------------------------------------


def known_td3(members: int, **kwargs) -> TD3:
    alg = TD3(deterministic_model(members), gamma=GAMMA, target_noise=0.0, policy_delay=1, **kwargs)
    alg.model.set_weights({**critic_weights(members, 1), **actor_weights(ACTION_DIM, 2)})
    alg.target_model.set_weights({**critic_weights(members, 4), **actor_weights(ACTION_DIM, 4)})
    return alg


def test_the_known_target_critics_disagree_on_which_is_smaller() -> None:
    """Guards the data of the next test: the minimum switches member between rows."""
    target = critic_weights(2, 4)
    next_q = q_np(target, NEXT_OBS, np.tanh(linear_actor_np(actor_weights(ACTION_DIM, 4), NEXT_OBS)))
    smaller = np.argmin(next_q[:, :, 0], axis=0)
    assert 0 < smaller.sum() < B


@pytest.mark.parametrize("members", [1, 2])
@pytest.mark.parametrize("replay", ["uniform", "n-step-prioritized"])
def test_deterministic_target_is_the_min_over_target_critics_of_the_target_policy(members, replay) -> None:
    alg = known_td3(members)
    row_fields = {} if replay == "uniform" else dict(bootstrap_steps=STEPS, weights=WEIGHTS)
    steps, weights = (1.0, 1.0) if replay == "uniform" else (STEPS, WEIGHTS)
    costs = call_learn(alg, **row_fields)

    online, target = alg.model.get_weights(), alg.target_model.get_weights()
    next_action = np.tanh(linear_actor_np(target, NEXT_OBS))
    y = REWARDS + GAMMA**steps * (1.0 - ENDS) * q_np(target, NEXT_OBS, next_action).min(axis=0)
    q = q_np(online, OBS, ACTIONS)
    critic_loss = np.mean(weights * ((q - y) ** 2).sum(axis=0))
    q_pi = q_np(online, OBS, np.tanh(linear_actor_np(online, OBS)))[0]
    actor_loss = -np.mean(weights * q_pi)

    assert float(costs["critic_loss"]) == pytest.approx(critic_loss, rel=1e-5)
    assert float(costs["actor_loss"]) == pytest.approx(actor_loss, rel=1e-5)
    assert float(costs["loss"]) == pytest.approx(critic_loss + actor_loss, rel=1e-5)
    np.testing.assert_allclose(costs["td_error"].numpy(), y - q.mean(axis=0), rtol=1e-5, atol=1e-6)


def test_sac_target_and_losses_match_numpy_for_the_same_noise() -> None:
    sac = SAC(gaussian_model(), gamma=GAMMA, initial_alpha=0.3, target_entropy=-0.5)
    sac.model.set_weights({**critic_weights(2, 1), **actor_weights(2 * ACTION_DIM, 2)})
    sac.target_model.set_weights({**critic_weights(2, 4), **actor_weights(2 * ACTION_DIM, 4)})
    paddle.seed(7)
    # The draws of learn's reparameterized samples: at s, then at s'.
    noise = np.concatenate([paddle.randn([B, ACTION_DIM]).numpy(), paddle.randn([B, ACTION_DIM]).numpy()])
    paddle.seed(7)
    costs = call_learn(sac, bootstrap_steps=STEPS, weights=WEIGHTS)

    online, target = sac.model.get_weights(), sac.target_model.get_weights()
    out = linear_actor_np(online, np.concatenate([OBS, NEXT_OBS]))
    mean, log_std = out[:, :ACTION_DIM], np.clip(out[:, ACTION_DIM:], LOG_STD_MIN, LOG_STD_MAX)
    u = (mean + np.exp(log_std) * noise).astype(np.float64)
    action = np.tanh(u)
    log_squash = 2.0 * (np.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))  # log(1 - tanh(u)^2), stable
    log_pi = (-0.5 * noise**2 - log_std - 0.5 * np.log(2 * np.pi) - log_squash).sum(-1, keepdims=True)
    alpha = 0.3
    soft_next = q_np(target, NEXT_OBS, action[B:]).min(axis=0) - alpha * log_pi[B:]
    y = REWARDS + GAMMA**STEPS * (1.0 - ENDS) * soft_next
    q = q_np(online, OBS, ACTIONS)
    critic_loss = np.mean(WEIGHTS * ((q - y) ** 2).sum(axis=0))
    actor_loss = np.mean(WEIGHTS * (alpha * log_pi[:B] - q_np(online, OBS, action[:B]).min(axis=0)))
    alpha_loss = -np.mean(WEIGHTS * math.log(alpha) * (log_pi[:B] - 0.5))

    assert float(costs["critic_loss"]) == pytest.approx(critic_loss, rel=1e-4)
    assert float(costs["actor_loss"]) == pytest.approx(actor_loss, rel=1e-4)
    assert float(costs["alpha_loss"]) == pytest.approx(alpha_loss, rel=1e-4)
    assert float(costs["entropy"]) == pytest.approx(-log_pi[:B].mean(), rel=1e-4)
    assert float(costs["alpha"]) == pytest.approx(alpha, rel=1e-6)
    np.testing.assert_allclose(costs["td_error"].numpy(), y - q.mean(axis=0), rtol=1e-4, atol=1e-5)


def test_tanh_gaussian_log_prob_includes_the_change_of_variables() -> None:
    """log pi(a) = log N(atanh(a); mean, std) - log(1 - a^2), a density on (-1, 1)."""
    model = GaussianActorCritic(OBS_DIM, ACTION_DIM, hidden_sizes=())
    model.actor.out.set_arrays({"w": np.zeros((OBS_DIM, 2), np.float32), "b": np.array([0.7, -0.2], np.float32)})
    action, log_prob = model.actor.dist(paddle.zeros([500, OBS_DIM])).rsample()
    a = action.numpy().astype(np.float64)
    std = math.exp(-0.2)

    def density(x):
        u = np.arctanh(x)
        return np.exp(-0.5 * ((u - 0.7) / std) ** 2) / (std * math.sqrt(2 * math.pi)) / (1 - x**2)

    np.testing.assert_allclose(log_prob.numpy(), np.log(density(a)), rtol=1e-4, atol=1e-4)
    grid = np.linspace(-1 + 1e-7, 1 - 1e-7, 400_001)
    assert np.trapezoid(density(grid), grid) == pytest.approx(1.0, abs=1e-3)


# -- each loss reaches only its own parameters -------------------------------------------


def part_grads(alg, cost: str, seed: int) -> dict:
    """Gradients of ``costs[cost]`` for every trainable parameter (None where none flows)."""
    paddle.seed(seed)
    costs = call_learn(alg)
    costs[cost].backward()
    grads = {}
    for part, params in parts(alg).items():
        grads[part] = [None if p.grad is None else p.grad.numpy().copy() for p in params]
        for p in params:
            p.clear_gradient(False)
    return grads


def parts(alg) -> dict:
    out = {"critic": alg.model.critic.parameters(), "actor": alg.model.actor.parameters()}
    if isinstance(alg, SAC):
        out["temperature"] = alg.temperature.parameters()
    return out


def assert_same(got: list, expected: list) -> None:
    for g, e in zip(got, expected):
        assert g is not None and e is not None
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)


def assert_none_or_zero(grads: list) -> None:
    assert all(g is None or not np.any(g) for g in grads)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DDPG(deterministic_model(1, (8, 8)), gamma=GAMMA),
        lambda: TD3(deterministic_model(2, (8, 8)), gamma=GAMMA, policy_delay=1),
        lambda: SAC(gaussian_model((8, 8)), gamma=GAMMA),
    ],
    ids=["ddpg", "td3", "sac"],
)
def test_each_part_gets_exactly_the_gradient_of_its_own_loss(make) -> None:
    alg = make()
    total = part_grads(alg, "loss", seed=11)
    critic_only = part_grads(alg, "critic_loss", seed=11)
    actor_only = part_grads(alg, "actor_loss", seed=11)
    assert_same(total["critic"], critic_only["critic"])
    assert_same(total["actor"], actor_only["actor"])
    assert_none_or_zero(critic_only["actor"])
    assert_none_or_zero(actor_only["critic"])
    if isinstance(alg, SAC):
        alpha_only = part_grads(alg, "alpha_loss", seed=11)
        assert_same(total["temperature"], alpha_only["temperature"])
        for grads in (critic_only, actor_only):
            assert_none_or_zero(grads["temperature"])
        assert_none_or_zero(alpha_only["critic"] + alpha_only["actor"])


# -- TD3's target smoothing and delayed actor updates ------------------------------------


def smoothed_offsets(target_noise: float, noise_clip: float, rows: int = 20_000) -> np.ndarray:
    alg = TD3(deterministic_model(2), target_noise=target_noise, noise_clip=noise_clip)
    alg.target_model.set_weights({**critic_weights(2, 4), **actor_weights(ACTION_DIM, 4)})
    next_obs = paddle.to_tensor(0.1 * RNG.standard_normal((rows, OBS_DIM)).astype(np.float32))
    with paddle.no_grad():
        smoothed = alg.next_actions(next_obs).numpy()
        policy = alg.target_model.actor.forward(next_obs).numpy()
    assert np.all(np.abs(smoothed) <= 1.0)
    return smoothed - policy


def test_td3_target_smoothing_noise_has_its_scale_and_clip() -> None:
    wide = smoothed_offsets(target_noise=0.2, noise_clip=10.0)  # policy actions stay within +-0.4 of 0
    assert np.mean(wide) == pytest.approx(0.0, abs=0.01)
    assert np.std(wide) == pytest.approx(0.2, rel=0.05)
    clipped = smoothed_offsets(target_noise=1.0, noise_clip=0.1)
    assert np.abs(clipped).max() <= 0.1 + 1e-6
    assert np.mean(np.isclose(np.abs(clipped), 0.1, atol=1e-6)) > 0.8  # most draws exceed the clip
    assert not np.any(smoothed_offsets(target_noise=0.0, noise_clip=0.5))


def test_td3_updates_actor_and_targets_only_every_policy_delay_updates() -> None:
    alg = TD3(deterministic_model(2, (8,)), policy_delay=3, tau=0.5)
    task = parl.ComputationTask("td3", alg)
    for update in range(1, 8):
        actor, critic = alg.model.actor.get_weights(), alg.model.critic.get_weights()
        target = alg.target_model.get_weights()
        costs = task.learn(numpy_batch())
        actor_step = update % 3 == 0
        assert ("actor_loss" in costs) == actor_step
        assert changed(actor, alg.model.actor.get_weights()) == actor_step
        assert changed(critic, alg.model.critic.get_weights())
        assert changed(target, alg.target_model.get_weights()) == actor_step


def changed(before: dict, after: dict) -> bool:
    return any(not np.array_equal(before[k], after[k]) for k in before)


def test_ddpg_updates_actor_and_targets_every_update() -> None:
    alg = DDPG(deterministic_model(1, (8,)))
    task = parl.ComputationTask("ddpg", alg)
    for _ in range(3):
        actor, target = alg.model.actor.get_weights(), alg.target_model.get_weights()
        assert "actor_loss" in task.learn(numpy_batch())
        assert changed(actor, alg.model.actor.get_weights())
        assert changed(target, alg.target_model.get_weights())


# -- SAC's temperature -----------------------------------------------------------------


def test_sac_temperature_gradient_is_the_entropy_gap() -> None:
    """d L_alpha / d log_alpha = -(mean log pi + target_entropy) = entropy - target_entropy."""
    sac = SAC(gaussian_model((8,)), target_entropy=-0.25)
    costs = call_learn(sac)
    costs["loss"].backward()
    grad = float(sac.temperature.log_alpha().grad)
    assert grad == pytest.approx(float(costs["entropy"]) + 0.25, rel=1e-5)


@pytest.mark.parametrize("target_entropy, direction", [(-5.0, -1), (5.0, 1)])
def test_sac_temperature_moves_toward_the_target_entropy(target_entropy, direction) -> None:
    """Entropy above the target lowers alpha; below it raises alpha (a 1-D tanh-Gaussian's entropy < 1)."""
    sac = SAC(gaussian_model((8,)), target_entropy=target_entropy, learning_rate=1e-2)
    task = parl.ComputationTask("sac", sac)
    alphas = [task.learn(numpy_batch())["alpha"] for _ in range(5)]
    assert np.all(direction * np.diff(alphas) > 0), alphas


def test_sac_with_fixed_alpha_trains_no_temperature() -> None:
    sac = SAC(gaussian_model((8,)), auto_alpha=False, initial_alpha=0.2)
    task = parl.ComputationTask("sac", sac)
    for _ in range(3):
        costs = task.learn(numpy_batch())
    assert "alpha_loss" not in costs and costs["alpha"] == pytest.approx(0.2)
    assert all(p is not sac.temperature.log_alpha() for p in sac.parameters())


# -- acting, weights and settings ------------------------------------------------------------


def test_sac_predict_samples_in_bounds_and_is_tanh_mean_when_deterministic() -> None:
    sac = SAC(gaussian_model())
    obs = paddle.to_tensor(np.repeat(OBS[:1], 200, axis=0))
    sampled = sac.predict({"obs": obs}, {})[0]["action"].numpy()
    mean = sac.predict({"obs": obs}, {}, deterministic=True)[0]["action"].numpy()
    out = linear_actor_np(sac.model.get_weights(), OBS[:1])
    assert np.all(np.abs(sampled) < 1.0) and np.std(sampled) > 0.01
    np.testing.assert_allclose(mean, np.tanh(np.repeat(out[:, :ACTION_DIM], 200, axis=0)), rtol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DDPG(deterministic_model(1, (8,))),
        lambda: TD3(deterministic_model(2, (8,))),
        lambda: SAC(gaussian_model((8,))),
    ],
    ids=["ddpg", "td3", "sac"],
)
def test_weights_carry_every_model_to_a_fresh_task(make) -> None:
    learner, evaluator = parl.ComputationTask("a", make()), parl.ComputationTask("b", make())
    costs = learner.learn(numpy_batch(bootstrap_steps=STEPS, weights=WEIGHTS))
    assert costs["td_error"].shape == (B,) and all(np.isfinite(v).all() for v in costs.values())
    evaluator.set_algorithm_weights(learner.algorithm_weights())
    for task in (learner, evaluator):
        assert set(task.algorithm_weights()) >= {"model", "target_model"}
    args = ({"obs": OBS}, {})
    np.testing.assert_array_equal(
        learner.predict(*args, deterministic=True)[0]["action"],
        evaluator.predict(*args, deterministic=True)[0]["action"],
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: DDPG(lambda: DeterministicActorCritic(3, 1, num_critics=1, hidden_sizes=(16,))),
        lambda: TD3(lambda: DeterministicActorCritic(3, 1, num_critics=2, hidden_sizes=(16,))),
        lambda: SAC(lambda: GaussianActorCritic(3, 1, hidden_sizes=(16,))),
    ],
    ids=["ddpg", "td3", "sac"],
)
def test_learns_from_prioritized_n_step_replay_on_pendulum(make) -> None:
    """Through the Manager: n-step batches carry bootstrap_steps, td_error becomes the new priorities."""
    manager = parl.Manager({"RL": parl.TaskSettings(make)}, thread_placement="os")
    helper = parl.ExpReplayHelper(
        capacity=1_000, batch_size=32, warmup_steps=64, seed=0, prioritized=True, n_step=3, gamma=0.99
    )
    agent = GymAgent(gym.make("Pendulum-v1", max_episode_steps=100), seed=0, num_games=2)
    manager.add_agent(agent, {"RL": helper})
    manager.start()
    manager.join(timeout=120)
    manager.stop()
    assert manager.errors == []
    assert manager.tasks["RL"].update_steps > 100
    priorities = helper.buffer.priorities(np.arange(len(helper.buffer)))
    assert len(np.unique(priorities)) > len(priorities) // 2  # set from td_error, not the initial maximum


def test_targets_start_as_copies_and_an_untrained_task_hands_over_complete_weights() -> None:
    """Models are built when made: a snapshot taken before any update fits an evaluator that has acted."""
    learner, evaluator = (
        parl.ComputationTask("a", SAC(gaussian_model((8,)))),
        parl.ComputationTask("b", SAC(gaussian_model((8,)))),
    )
    alg = learner.algorithm
    np.testing.assert_equal(alg.model.critic.get_weights(), alg.target_model.critic.get_weights())
    evaluator.predict({"obs": OBS}, {}, deterministic=True)
    evaluator.set_algorithm_weights(learner.algorithm_weights())
    np.testing.assert_array_equal(
        learner.predict({"obs": OBS}, {}, deterministic=True)[0]["action"],
        evaluator.predict({"obs": OBS}, {}, deterministic=True)[0]["action"],
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: DDPG(gaussian_model()), "DeterministicActorCritic"),
        (lambda: SAC(deterministic_model(2)), "GaussianActorCritic"),
        (lambda: TD3(deterministic_model(2), policy_delay=0), "policy_delay"),
        (lambda: TD3(deterministic_model(2), noise_clip=0.0), "noise_clip"),
        (lambda: TD3(deterministic_model(2), target_noise=-0.1), "target_noise"),
        (lambda: TD3(deterministic_model(2), target_update_interval=2), "target_update_interval"),
        (lambda: SAC(gaussian_model(), initial_alpha=0.0), "initial_alpha"),
        (lambda: SAC(gaussian_model(), target_entropy="high"), "target_entropy"),
        (lambda: SAC(gaussian_model(), tau=0.0), "tau"),
        (lambda: DDPG(deterministic_model(1), gamma=1.5), "gamma"),
        (lambda: DeterministicActorCritic(OBS_DIM, ACTION_DIM, num_critics=0), "num_critics"),
    ],
)
def test_bad_settings_raise_naming_the_setting(make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make()


class _ArgumentsDDPG(DDPG):
    """A subclass written when ActorCriticQ took the model class and the actor's target as arguments."""

    model_class = GaussianActorCritic  # replaced by the argument below, as before

    def __init__(self, model_func) -> None:
        ActorCriticQ.__init__(
            self,
            model_func,
            model_class=DeterministicActorCritic,
            gamma=GAMMA,
            tau=0.005,
            target_actor=True,
            target_update_interval=1,
            learning_rate=1e-3,
            grad_clip=None,
        )


def test_the_model_class_and_target_actor_arguments_still_work_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="class attributes"):
        old = _ArgumentsDDPG(deterministic_model(1, (8,)))
    assert old.model_class is DeterministicActorCritic and old.target_actor is True
    new = DDPG(deterministic_model(1, (8,)), gamma=GAMMA)
    new.model.set_weights(old.model.get_weights())
    new.target_model.set_weights(old.target_model.get_weights())
    old_costs, new_costs = call_learn(old), call_learn(new)
    assert sorted(old_costs) == sorted(new_costs) and "actor_loss" in new_costs
    for name in new_costs:
        np.testing.assert_array_equal(old_costs[name].numpy(), new_costs[name].numpy(), err_msg=name)
