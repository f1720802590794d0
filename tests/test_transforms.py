"""RunningMeanStd, InputNormalizer and RewardTransform."""

from __future__ import annotations

import numpy as np
import pytest

from parl.serving.transforms import InputNormalizer, RewardTransform, RunningMeanStd


def test_running_mean_std_over_several_batches_equals_the_statistics_of_their_concatenation() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc, scale, (n, 3)) for loc, scale, n in ((5.0, 2.0, 7), (-1.0, 0.5, 1), (0.0, 10.0, 40))]
    stats = RunningMeanStd([3])
    for batch in batches:
        stats.update(batch.astype(np.float32))
    everything = np.concatenate([b.astype(np.float32) for b in batches]).astype(np.float64)
    np.testing.assert_allclose(stats.mean, everything.mean(axis=0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stats.var, everything.var(axis=0), rtol=1e-10)
    assert stats.count == 48


def test_running_mean_std_handles_multi_dimensional_features_and_empty_batches() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 2, 3)), rng.standard_normal((6, 2, 3)) * 3 + 1
    stats = RunningMeanStd([2, 3])
    stats.update(a)
    stats.update(np.zeros((0, 2, 3)))
    stats.update(b)
    both = np.concatenate([a, b])
    np.testing.assert_allclose(stats.mean, both.mean(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stats.var, both.var(axis=0), rtol=1e-10)
    assert stats.count == 10


def test_running_mean_std_starts_at_zero_mean_and_unit_variance() -> None:
    stats = RunningMeanStd([2])
    np.testing.assert_array_equal(stats.mean, [0.0, 0.0])
    np.testing.assert_array_equal(stats.var, [1.0, 1.0])
    assert stats.count == 0


def test_running_mean_std_state_dict_round_trip() -> None:
    stats = RunningMeanStd([2])
    stats.update(np.array([[1.0, 2.0], [3.0, 8.0]]))
    state = stats.state_dict()
    other = RunningMeanStd([2])
    other.set_state_dict(state)
    np.testing.assert_array_equal(other.mean, stats.mean)
    np.testing.assert_array_equal(other.var, stats.var)
    assert other.count == stats.count == 2
    # The state is a copy: later updates do not change it.
    stats.update(np.array([[100.0, 100.0]]))
    np.testing.assert_array_equal(state["mean"], [2.0, 5.0])
    with pytest.raises(ValueError, match=r"\[3\].*\[2\]"):
        other.set_state_dict({"mean": np.zeros(3), "var": np.ones(3), "count": np.array(1.0)})


def test_input_normalizer_normalizes_by_the_running_statistics() -> None:
    rng = np.random.default_rng(2)
    obs = rng.normal(3.0, 2.0, (50, 4)).astype(np.float32)
    normalizer = InputNormalizer({"obs": [4]}, clip=100.0)
    normalizer.update({"obs": obs})
    out = normalizer({"obs": obs})["obs"]
    assert out.dtype == np.float32 and out.shape == (50, 4)
    expected = (obs - obs.astype(np.float64).mean(axis=0)) / np.sqrt(obs.astype(np.float64).var(axis=0) + 1e-8)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=0), 1.0, rtol=1e-4)


def test_input_normalizer_leaves_other_inputs_alone_and_does_not_change_its_argument() -> None:
    normalizer = InputNormalizer({"obs": [1]})
    normalizer.update({"obs": np.array([[1.0], [3.0]], np.float32)})
    ids = np.array([[7], [9]], np.int64)
    obs = np.array([[1.0], [3.0]], np.float32)
    out = normalizer({"obs": obs, "id": ids})
    assert out["id"] is ids
    np.testing.assert_allclose(out["obs"], [[-1.0], [1.0]], rtol=1e-6)
    np.testing.assert_array_equal(obs, [[1.0], [3.0]])


def test_input_normalizer_clips_the_normalized_values() -> None:
    normalizer = InputNormalizer({"obs": [2]}, clip=2.0)
    normalizer.update({"obs": np.array([[0.0, 0.0], [2.0, 2.0]], np.float32)})  # mean 1, std 1
    out = normalizer({"obs": np.array([[100.0, -100.0], [2.5, 0.0]], np.float32)})["obs"]
    np.testing.assert_allclose(out, [[2.0, -2.0], [1.5, -1.0]], rtol=1e-6)


def test_input_normalizer_epsilon_keeps_a_constant_input_finite() -> None:
    normalizer = InputNormalizer({"obs": [2]}, clip=1e6, epsilon=1e-4)
    normalizer.update({"obs": np.array([[5.0, 1.0], [5.0, 3.0]], np.float32)})  # feature 0 has variance 0
    out = normalizer({"obs": np.array([[5.0, 2.0], [5.01, 2.0]], np.float32)})["obs"]
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[:, 0], [0.0, 0.01 / np.sqrt(1e-4)], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], [0.0, 0.0], atol=1e-6)
    # The epsilon is added to the variance, not the std: var 1 gives 1 / sqrt(1 + 1e-4).
    np.testing.assert_allclose(
        normalizer({"obs": np.array([[5.0, 3.0]], np.float32)})["obs"][0, 1], 1.0 / np.sqrt(1.0 + 1e-4), rtol=1e-6
    )


def test_input_normalizer_sees_updates_after_being_called() -> None:
    normalizer = InputNormalizer({"obs": [1]})
    normalizer.update({"obs": np.array([[0.0], [2.0]], np.float32)})
    assert normalizer({"obs": np.array([[1.0]], np.float32)})["obs"][0, 0] == pytest.approx(0.0, abs=1e-6)
    normalizer.update({"obs": np.array([[10.0], [12.0]], np.float32)})  # mean now 6
    assert normalizer({"obs": np.array([[6.0]], np.float32)})["obs"][0, 0] == pytest.approx(0.0, abs=1e-6)


def test_input_normalizer_state_dict_round_trip() -> None:
    rng = np.random.default_rng(4)
    normalizer = InputNormalizer({"a": [2], "b": [3]}, clip=5.0)
    normalizer.update({"a": rng.standard_normal((9, 2)) + 4, "b": rng.standard_normal((9, 3)) * 7})
    probe = {"a": rng.standard_normal((3, 2)).astype(np.float32), "b": rng.standard_normal((3, 3)).astype(np.float32)}
    restored = InputNormalizer({"a": [2], "b": [3]}, clip=5.0)
    restored({"a": probe["a"], "b": probe["b"]})  # fills its cache with the default statistics
    restored.set_state_dict(normalizer.state_dict())
    for name in ("a", "b"):
        np.testing.assert_array_equal(restored(probe)[name], normalizer(probe)[name])
    assert restored.state_dict()["a"]["count"] == 9


def test_input_normalizer_refuses_statistics_of_other_inputs() -> None:
    normalizer = InputNormalizer({"a": [2]})
    with pytest.raises(ValueError, match="'b'"):
        normalizer.set_state_dict(InputNormalizer({"b": [2]}).state_dict())


@pytest.mark.parametrize("kwargs, name", [(dict(clip=0.0), "clip"), (dict(epsilon=-1.0), "epsilon")])
def test_input_normalizer_bad_settings_raise(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        InputNormalizer({"obs": [1]}, **kwargs)


def test_reward_transform_scales_then_clips() -> None:
    rewards = {"reward": np.array([[1.0], [-30.0], [8.0], [0.5]], np.float32)}
    out = RewardTransform(scale=0.5, clip=2.0)(rewards)["reward"]
    np.testing.assert_allclose(out, [[0.5], [-2.0], [2.0], [0.25]])
    assert out.dtype == np.float32
    np.testing.assert_allclose(RewardTransform(scale=0.1)(rewards)["reward"], [[0.1], [-3.0], [0.8], [0.05]], rtol=1e-6)
    np.testing.assert_allclose(RewardTransform(clip=1.0)(rewards)["reward"], [[1.0], [-1.0], [1.0], [0.5]])
    np.testing.assert_array_equal(rewards["reward"], [[1.0], [-30.0], [8.0], [0.5]])  # the input is not changed


def test_reward_transform_identity() -> None:
    assert RewardTransform().identity
    assert not RewardTransform(scale=2.0).identity
    assert not RewardTransform(clip=5.0).identity
    rewards = {"r": np.array([[3.0]], np.float32)}
    np.testing.assert_array_equal(RewardTransform()(rewards)["r"], [[3.0]])


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(scale=0.0), "reward_scale"), (dict(scale=-1.0), "reward_scale"), (dict(clip=0.0), "reward_clip")],
)
def test_reward_transform_bad_settings_raise(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        RewardTransform(**kwargs)


def test_statistics_load_with_their_count_as_a_scalar_or_a_one_element_array() -> None:
    stats = RunningMeanStd([2])
    stats.update(np.array([[1.0, 2.0], [3.0, 4.0]]))
    for count in (np.array(stats.count), np.array([stats.count])):
        fresh = RunningMeanStd([2])
        fresh.set_state_dict({**stats.state_dict(), "count": count})
        assert fresh.count == stats.count
        np.testing.assert_array_equal(fresh.mean, stats.mean)
