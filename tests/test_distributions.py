"""Categorical, DiagGaussian and TanhGaussian against numpy and closed forms."""

from __future__ import annotations

import math

import numpy as np
import paddle
import pytest

from parl.layers.distributions import Categorical, DiagGaussian, TanhGaussian

LOGITS = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0], [-3.0, 4.0, 1.0], [10.0, -10.0, 0.0]], np.float32)


def numpy_log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def t(array: np.ndarray) -> paddle.Tensor:
    return paddle.to_tensor(array)


# -- Categorical ----------------------------------------------------------------------


def test_categorical_log_prob_matches_numpy() -> None:
    dist = Categorical(t(LOGITS))
    actions = np.array([[1], [0], [2], [1]], np.int64)
    log_prob = dist.log_prob(t(actions)).numpy()
    assert log_prob.shape == (4, 1)
    expected = np.take_along_axis(numpy_log_softmax(LOGITS), actions, axis=1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-6)


def test_categorical_entropy_matches_numpy() -> None:
    entropy = Categorical(t(LOGITS)).entropy().numpy()
    log_p = numpy_log_softmax(LOGITS)
    expected = -(np.exp(log_p) * log_p).sum(axis=-1, keepdims=True)
    assert entropy.shape == (4, 1)
    np.testing.assert_allclose(entropy, expected, rtol=1e-5, atol=1e-6)
    assert entropy[1, 0] == pytest.approx(math.log(3.0), rel=1e-6)  # uniform row


def test_categorical_mode_is_the_argmax() -> None:
    mode = Categorical(t(LOGITS)).mode().numpy()
    assert mode.shape == (4, 1) and mode.dtype == np.int64
    np.testing.assert_array_equal(mode[:, 0], [1, 0, 1, 0])


def test_categorical_samples_follow_the_probabilities() -> None:
    logits = np.log(np.array([[0.2, 0.5, 0.3]], np.float32))
    dist = Categorical(t(np.repeat(logits, 4000, axis=0)))
    paddle.seed(1234)
    first = dist.sample().numpy()
    paddle.seed(1234)
    again = dist.sample().numpy()
    np.testing.assert_array_equal(first, again)  # seeded by paddle's global generator
    assert first.shape == (4000, 1) and first.dtype == np.int64
    frequencies = np.bincount(first[:, 0], minlength=3) / 4000
    # 4000 draws: the standard error of each frequency is below 0.008.
    np.testing.assert_allclose(frequencies, [0.2, 0.5, 0.3], atol=0.03)


def test_categorical_log_prob_has_gradients_towards_the_logits() -> None:
    logits = t(LOGITS)
    logits.stop_gradient = False
    Categorical(logits).log_prob(t(np.array([[0], [1], [2], [0]], np.int64))).sum().backward()
    probs = np.exp(numpy_log_softmax(LOGITS))
    onehot = np.eye(3, dtype=np.float32)[[0, 1, 2, 0]]
    np.testing.assert_allclose(logits.grad.numpy(), onehot - probs, rtol=1e-5, atol=1e-6)


# -- DiagGaussian ---------------------------------------------------------------------

MEAN = np.array([[0.0, 1.0], [-2.0, 0.5], [3.0, -1.0]], np.float32)
STD = np.array([[1.0, 0.5], [2.0, 0.1], [0.3, 1.5]], np.float32)


def normal_log_pdf(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def test_diag_gaussian_log_prob_sums_the_per_dimension_normal_densities() -> None:
    actions = np.array([[0.5, 0.0], [-2.0, 0.6], [1.0, 2.0]], np.float32)
    log_prob = DiagGaussian(t(MEAN), t(STD)).log_prob(t(actions)).numpy()
    assert log_prob.shape == (3, 1)
    expected = normal_log_pdf(actions, MEAN, STD).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-5)


def test_diag_gaussian_entropy_is_the_closed_form() -> None:
    entropy = DiagGaussian(t(MEAN), t(STD)).entropy().numpy()
    expected = (0.5 * np.log(2 * np.pi * np.e * STD**2)).sum(axis=-1, keepdims=True)
    assert entropy.shape == (3, 1)
    np.testing.assert_allclose(entropy, expected, rtol=1e-5, atol=1e-6)


def test_diag_gaussian_mode_is_the_mean_and_samples_have_its_moments() -> None:
    dist = DiagGaussian(t(np.repeat(MEAN[:1], 20000, axis=0)), t(np.repeat(STD[:1], 20000, axis=0)))
    np.testing.assert_array_equal(dist.mode().numpy(), np.repeat(MEAN[:1], 20000, axis=0))
    paddle.seed(7)
    samples = dist.sample().numpy()
    assert samples.shape == (20000, 2) and samples.dtype == np.float32
    np.testing.assert_allclose(samples.mean(axis=0), MEAN[0], atol=0.03)
    np.testing.assert_allclose(samples.std(axis=0), STD[0], rtol=0.03)


# -- TanhGaussian ---------------------------------------------------------------------


def rsample_with_u(mean: np.ndarray, log_std: np.ndarray, seed: int):
    """rsample, plus the pre-squash sample ``u`` recovered by drawing the same noise again."""
    mean_t, log_std_t = t(mean), t(log_std)
    paddle.seed(seed)
    action, log_prob = TanhGaussian(mean_t, log_std_t).rsample()
    paddle.seed(seed)
    u = DiagGaussian(mean_t, paddle.exp(log_std_t)).sample().numpy().astype(np.float64)
    return action.numpy(), log_prob.numpy(), u


def test_tanh_gaussian_log_prob_is_the_base_log_prob_minus_the_naive_jacobian() -> None:
    mean = np.array([[0.0, 0.5], [-1.0, 1.5], [0.3, -0.7]], np.float32)
    log_std = np.array([[-1.0, -0.5], [-1.2, -1.0], [-0.3, -2.0]], np.float32)  # moderate |u|
    action, log_prob, u = rsample_with_u(mean, log_std, seed=3)
    assert np.abs(u).max() < 4.0, "the naive formula needs moderate u"
    np.testing.assert_allclose(action, np.tanh(u), rtol=1e-5, atol=1e-6)
    base = normal_log_pdf(u, mean, np.exp(log_std)).sum(axis=-1, keepdims=True)
    naive = base - np.log(1.0 - np.tanh(u) ** 2).sum(axis=-1, keepdims=True)
    assert log_prob.shape == (3, 1)
    np.testing.assert_allclose(log_prob, naive, rtol=1e-4, atol=1e-4)


def test_tanh_gaussian_log_prob_stays_finite_for_large_u() -> None:
    # |u| around 30: 1 - tanh(u)^2 underflows to 0 in float32, the naive log is -inf.
    mean = np.array([[30.0, -30.0], [25.0, 40.0]], np.float32)
    log_std = np.full((2, 2), -3.0, np.float32)
    action, log_prob, u = rsample_with_u(mean, log_std, seed=5)
    assert np.all(np.isfinite(log_prob))
    assert np.all(np.abs(action) <= 1.0)
    # log(1 - tanh(u)^2) ~ 2 log 2 - 2|u| for large |u|.
    base = normal_log_pdf(u, mean, np.exp(log_std)).sum(axis=-1, keepdims=True)
    asymptotic = base - (2.0 * np.log(2.0) - 2.0 * np.abs(u)).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(log_prob, asymptotic, rtol=1e-4)


def test_tanh_gaussian_rsample_passes_gradients_to_mean_and_log_std() -> None:
    mean = t(np.array([[0.2, -0.4], [1.0, 0.0]], np.float32))
    log_std = t(np.array([[-0.5, 0.0], [-1.0, -0.2]], np.float32))
    mean.stop_gradient = False
    log_std.stop_gradient = False
    paddle.seed(11)
    action, log_prob = TanhGaussian(mean, log_std).rsample()
    (action.sum() + log_prob.sum()).backward()
    for grad in (mean.grad, log_std.grad):
        assert grad is not None
        assert np.all(np.isfinite(grad.numpy()))
        assert np.abs(grad.numpy()).sum() > 0


def test_tanh_gaussian_action_gradient_matches_the_reparameterization() -> None:
    # d tanh(mean + std * noise) / d mean = 1 - tanh(u)^2.
    mean_np = np.array([[0.2, -0.4, 1.0]], np.float32)
    mean = t(mean_np)
    mean.stop_gradient = False
    log_std = t(np.full((1, 3), -0.5, np.float32))
    paddle.seed(13)
    action, _ = TanhGaussian(mean, log_std).rsample()
    action.sum().backward()
    np.testing.assert_allclose(mean.grad.numpy(), 1.0 - action.numpy() ** 2, rtol=1e-5, atol=1e-6)


def test_tanh_gaussian_mode_is_tanh_of_the_mean() -> None:
    mean = np.array([[0.0, 2.0, -1.0]], np.float32)
    mode = TanhGaussian(t(mean), t(np.zeros_like(mean))).mode().numpy()
    np.testing.assert_allclose(mode, np.tanh(mean), rtol=1e-6)
