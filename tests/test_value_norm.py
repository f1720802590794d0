"""Value normalization: ValueNormalizer's statistics, and PPO's value_normalization (targets and
advantages recomputed in numpy, the statistics kept in checkpoints)."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from test_ppo import GAMMA, LENGTHS, START, gae, learn_steps, make_batch, make_ppo

from parl.algorithms.appo import APPO
from parl.algorithms.value_norm import ValueNormalizer

from toys import linear_actor_critic, linear_forward


def test_before_any_batch_nothing_changes() -> None:
    norm = ValueNormalizer()
    values = np.array([[-3.0], [2.5]], np.float32)
    assert np.array_equal(norm.denormalize(values), values) and norm.denormalize(values).dtype == np.float32


def test_targets_are_standardized_by_every_target_seen_and_denormalize_inverts() -> None:
    norm = ValueNormalizer()
    first = np.array([[-100.0], [-80.0], [-60.0]], np.float32)
    out = norm.fit_and_normalize(paddle.to_tensor(first)).numpy()
    assert out.mean() == pytest.approx(0.0, abs=1e-6) and out.std() == pytest.approx(1.0, rel=1e-5)
    second = np.array([[-20.0], [-10.0]], np.float32)
    out = norm.fit_and_normalize(paddle.to_tensor(second)).numpy()
    seen = np.concatenate([first, second])
    assert out[:, 0] == pytest.approx((second[:, 0] - seen.mean()) / seen.std(), rel=1e-5)
    assert norm.denormalize(out)[:, 0] == pytest.approx(second[:, 0], rel=1e-5)


def test_constant_targets_divide_by_a_floor_not_zero() -> None:
    norm = ValueNormalizer()
    out = norm.fit_and_normalize(paddle.to_tensor(np.full((4, 1), 7.0, np.float32))).numpy()
    assert np.all(np.isfinite(out)) and np.all(out == 0.0)


def test_state_round_trips_and_bad_entries_are_named() -> None:
    norm = ValueNormalizer()
    norm.fit_and_normalize(paddle.to_tensor(np.array([[1.0], [3.0]], np.float32)))
    restored = ValueNormalizer()
    restored.set_state(norm.state())
    assert restored.state() == norm.state() == {"value_mean": 2.0, "value_var": 1.0, "value_count": 2.0}
    with pytest.raises(ValueError, match="value_var must be a number, got 'x'"):
        restored.set_state({**norm.state(), "value_var": "x"})
    with pytest.raises(ValueError, match="value_mean must be a number, got None"):
        restored.set_state({"value_var": 1.0, "value_count": 2.0})
    with pytest.raises(ValueError, match="variance"):
        restored.set_state({**norm.state(), "value_var": -1.0})


def normalized_ppo(mean: float, var: float, **options) -> "object":
    ppo = make_ppo(value_normalization=True, advantage_normalization="none", **options)
    ppo.value_normalizer.set_state({"value_mean": mean, "value_var": var, "value_count": 10.0})
    return ppo


def test_advantages_use_the_critics_outputs_as_returns_and_targets_are_standardized() -> None:
    """With statistics mean 5, std 2 the critic's output v stands for the return 2 v + 5: GAE runs on
    those; the value loss compares the raw output with the returns standardized by the statistics
    after this batch's targets are folded in."""
    batch = make_batch()
    ppo = normalized_ppo(5.0, 4.0)
    costs = next(learn_steps(ppo, batch))
    _, v = linear_forward(START, batch["obs"])
    _, nv = linear_forward(START, batch["next_obs"])
    v, nv = 2.0 * v[:, 0] + 5.0, 2.0 * nv[:, 0] + 5.0
    adv = gae(batch["reward"][:, 0], v, nv, batch["end"][:, 0], LENGTHS)
    returns = adv + v
    n = len(returns)
    mean = (5.0 * 10 + returns.sum()) / (10 + n)
    var = (4.0 * 10 + returns.var() * n + (returns.mean() - 5.0) ** 2 * 10 * n / (10 + n)) / (10 + n)
    targets = (returns - mean) / np.sqrt(var)
    raw = (v - 5.0) / 2.0  # the critic's own outputs
    assert float(costs["value_loss"]) == pytest.approx(np.mean((raw - targets) ** 2), rel=1e-4)
    assert ppo.value_normalizer.state()["value_count"] == 10.0 + n
    assert ppo.value_normalizer.state()["value_mean"] == pytest.approx(mean, rel=1e-6)


def test_the_policy_loss_sees_the_same_advantages_as_without_normalization_at_identity_statistics() -> None:
    batch = make_batch()
    plain = next(learn_steps(make_ppo(advantage_normalization="none"), batch))
    normalized = next(learn_steps(normalized_ppo(0.0, 1.0), batch))
    assert float(normalized["policy_loss"]) == pytest.approx(float(plain["policy_loss"]), rel=1e-6)
    assert float(normalized["value_loss"]) != pytest.approx(float(plain["value_loss"]), rel=1e-3)


def test_ppo_keeps_the_statistics_in_its_state_and_needs_them_back() -> None:
    ppo = normalized_ppo(-40.0, 25.0)
    state = ppo.state()
    assert state == {"learned_rows": 0, "value_mean": -40.0, "value_var": 25.0, "value_count": 10.0}
    fresh = make_ppo(value_normalization=True)
    fresh.set_state(state)
    assert fresh.value_normalizer.state() == ppo.value_normalizer.state()
    with pytest.raises(ValueError, match="value_mean must be a number"):
        fresh.set_state({"learned_rows": 3})
    with pytest.raises(ValueError, match="unknown state entries \\['value_count', 'value_mean', 'value_var'\\]"):
        make_ppo().set_state(state)  # a run without normalization refuses a normalized one's statistics


def test_value_normalization_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="value_normalization must be true or false, got 'yes'"):
        make_ppo(value_normalization="yes")


def test_appo_passes_the_option_on() -> None:
    appo = APPO(linear_actor_critic, gamma=GAMMA, value_normalization=True)
    assert isinstance(appo.value_normalizer, ValueNormalizer)
    assert APPO(linear_actor_critic).value_normalizer is None
