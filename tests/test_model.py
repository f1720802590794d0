"""Tests of parl.Model (sharing, syncing, weights) and ComputationTask checkpoints."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import parl
from parl import layers
from parl.algorithms import DQN
from parl.models import MLPQModel

from toys import TwoLayerModel

RNG = np.random.default_rng(0)


def x(batch: int = 5) -> paddle.Tensor:
    return paddle.to_tensor(RNG.standard_normal((batch, 3)).astype("float32"))


def built(model: TwoLayerModel) -> TwoLayerModel:
    model.value(x(1))
    return model


def out(model: TwoLayerModel, inputs: paddle.Tensor) -> np.ndarray:
    with paddle.no_grad():
        return model.value(inputs).numpy()


# -- sharing ----------------------------------------------------------------------


def test_models_holding_one_layer_share_its_parameters() -> None:
    shared = layers.fc(4, act="tanh")
    a, b = built(TwoLayerModel(shared)), built(TwoLayerModel(shared))
    assert a.first is b.first
    assert a.first.params["w"] is b.first.params["w"]
    assert a.head.params["w"] is not b.head.params["w"]
    # A change made through one model is seen by the other.
    inputs = x()
    before = out(b, inputs)
    weights = a.get_weights()
    weights["first.w"] = weights["first.w"] + 1.0
    a.set_weights(weights)
    np.testing.assert_array_equal(b.first.params["w"].numpy(), weights["first.w"])
    assert not np.allclose(out(b, inputs), before)
    # Gradients through both models land on the one shared parameter.
    (a.value(inputs).sum() + b.value(inputs).sum()).backward()
    grad_a_only = shared.params["w"].grad.numpy().copy()
    shared.params["w"].clear_gradient()
    a.value(inputs).sum().backward()
    assert not np.allclose(shared.params["w"].grad.numpy(), grad_a_only)


def test_a_layer_held_twice_is_listed_once() -> None:
    class Twice(TwoLayerModel):
        def __init__(self) -> None:
            super().__init__()
            self.alias = [self.first]

    model = built(Twice())
    assert [path for path, _ in model.named_layers()] == ["first", "head"]
    assert sorted(model.get_weights()) == ["first.b", "first.w", "head.b", "head.w"]
    assert len(model.parameters()) == 4


def test_sync_skips_a_shared_layer_and_copies_the_rest() -> None:
    shared = layers.fc(4, act="tanh")
    a, b = built(TwoLayerModel(shared)), built(TwoLayerModel(shared))
    a.sync_weights_to(b)
    inputs = x()
    np.testing.assert_array_equal(out(a, inputs), out(b, inputs))
    assert a.first.params["w"] is b.first.params["w"]


# -- syncing ----------------------------------------------------------------------


def test_hard_sync_copies_values_and_leaves_the_source_alone() -> None:
    src, dst = built(TwoLayerModel()), built(TwoLayerModel())
    src_before = src.get_weights()
    assert not np.array_equal(src_before["head.w"], dst.get_weights()["head.w"])
    src.sync_weights_to(dst, decay=0.0)
    dst_after = dst.get_weights()
    for key, value in src_before.items():
        np.testing.assert_array_equal(dst_after[key], value)
        np.testing.assert_array_equal(src.get_weights()[key], value)
    # Copies, not aliases: changing the source later leaves the target alone.
    assert src.head.params["w"] is not dst.head.params["w"]
    src.set_weights({k: v + 1.0 for k, v in src_before.items()})
    np.testing.assert_array_equal(dst.get_weights()["head.w"], src_before["head.w"])


def test_soft_sync_is_a_polyak_average() -> None:
    src, dst = built(TwoLayerModel()), built(TwoLayerModel())
    s, t = src.get_weights(), dst.get_weights()
    src.sync_weights_to(dst, decay=0.9)
    after = dst.get_weights()
    for key in s:
        expected = np.float32(0.9) * t[key] + np.float32(0.1) * s[key]
        np.testing.assert_allclose(after[key], expected, rtol=1e-6, atol=1e-7)
        assert not np.allclose(after[key], s[key]) or np.allclose(s[key], t[key])
    np.testing.assert_array_equal(src.get_weights()["head.w"], s["head.w"])


@pytest.mark.parametrize("decay", [-0.1, 1.0, 1.5])
def test_sync_rejects_decay_outside_unit_interval(decay: float) -> None:
    src, dst = built(TwoLayerModel()), built(TwoLayerModel())
    with pytest.raises(ValueError, match="decay"):
        src.sync_weights_to(dst, decay=decay)


def test_sync_into_a_fresh_clone_lines_up_by_structure() -> None:
    def model_func() -> MLPQModel:
        return MLPQModel(obs_dim=3, num_actions=2, hidden_sizes=(8, 8), dueling=True)

    src = model_func()
    obs = {"obs": x()}
    src.value(obs)
    clone = model_func()
    assert all(not layer.built for _, layer in clone.named_layers())
    src_names = [layer.name for _, layer in src.named_layers()]
    clone_names = [layer.name for _, layer in clone.named_layers()]
    assert not set(src_names) & set(clone_names)
    src.sync_weights_to(clone)
    assert all(layer.built for _, layer in clone.named_layers())
    assert clone.hidden[0].params["w"].name != src.hidden[0].params["w"].name
    with paddle.no_grad():
        np.testing.assert_array_equal(clone.value(obs).numpy(), src.value(obs).numpy())


def test_sync_between_different_structures_raises() -> None:
    small = MLPQModel(obs_dim=3, num_actions=2, hidden_sizes=(8,))
    big = MLPQModel(obs_dim=3, num_actions=2, hidden_sizes=(8, 8))
    with pytest.raises(ValueError, match="layer paths differ"):
        small.sync_weights_to(big)


# -- get/set weights ----------------------------------------------------------------


def test_get_set_weights_round_trip() -> None:
    model = built(TwoLayerModel())
    inputs = x()
    weights, expected = model.get_weights(), out(model, inputs)
    # get_weights returns copies.
    weights["head.w"][...] = 0.0
    assert not np.array_equal(model.get_weights()["head.w"], weights["head.w"])
    weights = model.get_weights()
    model.set_weights({k: v * 2.0 for k, v in weights.items()})
    assert not np.allclose(out(model, inputs), expected)
    model.set_weights(weights)
    np.testing.assert_array_equal(out(model, inputs), expected)
    other = built(TwoLayerModel())
    other.set_weights(weights)
    np.testing.assert_array_equal(out(other, inputs), expected)
    fresh = TwoLayerModel()  # never called: built from the values
    fresh.set_weights(weights)
    np.testing.assert_array_equal(out(fresh, inputs), expected)


@pytest.mark.parametrize(
    "change, key, words",
    [
        (lambda w: w.pop("head.b"), "head.b", "no values"),
        (lambda w: [w.pop("head.b"), w.pop("head.w")], "head.w", "no values"),
        (lambda w: w.__setitem__("head.z", np.zeros(2, "float32")), "head.z", "unknown"),
        (lambda w: w.__setitem__("tail.w", np.zeros(2, "float32")), "tail.w", "unknown"),
        (lambda w: w.__setitem__("head.w", np.zeros((5, 2), "float32")), "head.w", "expected shape [4, 2], got [5, 2]"),
    ],
    ids=["missing", "missing-layer", "unknown-suffix", "unknown-layer", "shape"],
)
def test_set_weights_rejects_bad_keys_and_shapes(change, key, words) -> None:
    model = built(TwoLayerModel())
    before = model.get_weights()
    bad = {k: v + 1.0 for k, v in before.items()}
    change(bad)
    with pytest.raises(ValueError) as info:
        model.set_weights(bad)
    assert key in str(info.value) and words in str(info.value)
    # Nothing was set: the check happens before any value changes.
    for k, v in model.get_weights().items():
        np.testing.assert_array_equal(v, before[k])


# -- checkpoints ----------------------------------------------------------------------


def _dqn_func():
    return parl.create_algorithm_func(
        MLPQModel,
        dict(obs_dim=3, num_actions=2, hidden_sizes=(8,)),
        DQN,
        dict(gamma=0.9, learning_rate=1e-2, target_update_interval=10),
    )


def _batch(seed: int, size: int = 6) -> parl.Transition:
    rng = np.random.default_rng(seed)
    return parl.Transition(
        inputs={"obs": rng.standard_normal((size, 3)).astype("float32")},
        next_inputs={"obs": rng.standard_normal((size, 3)).astype("float32")},
        states={},
        next_states={},
        actions={"action": rng.integers(0, 2, (size, 1))},
        rewards={"reward": rng.standard_normal((size, 1)).astype("float32")},
        next_episode_end=(rng.random((size, 1)) < 0.3).astype("float32"),
    )


def _q_values(task: parl.ComputationTask, obs: np.ndarray) -> np.ndarray:
    with paddle.no_grad():
        return task.algorithm.model.value({"obs": paddle.to_tensor(obs)}).numpy()


def _assert_same_weights(a: parl.ComputationTask, b: parl.ComputationTask) -> None:
    wa, wb = a.algorithm_weights(), b.algorithm_weights()
    assert sorted(wa) == sorted(wb) == ["model", "target_model"]
    for name in wa:
        assert sorted(wa[name]) == sorted(wb[name])
        for key in wa[name]:
            np.testing.assert_array_equal(wa[name][key], wb[name][key], err_msg=f"{name} {key}")


def test_checkpoint_round_trip_into_a_fresh_task(tmp_path) -> None:
    func = _dqn_func()
    original = parl.ComputationTask("RL", func())
    for step in range(13):  # 13 updates: one target sync at 10, so target and online differ
        original.learn(_batch(step))
    path = str(tmp_path / "ckpt" / "RL.pdckpt")
    original.save(path)

    restored = parl.ComputationTask("RL", func())
    original_names = {layer.name for _, layer in original.algorithm.model.named_layers()}
    restored_names = {layer.name for _, layer in restored.algorithm.model.named_layers()}
    assert not original_names & restored_names
    restored.load(path)

    assert restored.update_steps == original.update_steps == 13
    _assert_same_weights(original, restored)
    obs = _batch(100).inputs["obs"]
    np.testing.assert_array_equal(_q_values(restored, obs), _q_values(original, obs))
    np.testing.assert_array_equal(
        restored.predict({"obs": obs}, {})[0]["action"], original.predict({"obs": obs}, {})[0]["action"]
    )

    # One more step on the same batch gives the same costs and weights: the Adam
    # moments, the target network and the update counter were all restored.
    batch = _batch(200)
    _assert_same_costs(restored.learn(batch), original.learn(batch))
    _assert_same_weights(original, restored)
    assert restored.update_steps == original.update_steps == 14

    # Control: weights alone, without the optimizer state, would have diverged.
    weights_only = parl.ComputationTask("RL", func())
    state_at_save = parl.ComputationTask("RL", func())
    state_at_save.load(path)
    weights_only.set_algorithm_weights(state_at_save.algorithm_weights())
    weights_only.learn(batch)
    assert not np.array_equal(
        weights_only.algorithm_weights()["model"]["q.w"], original.algorithm_weights()["model"]["q.w"]
    )


def _assert_same_costs(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_checkpoint_load_into_a_task_that_has_trained(tmp_path) -> None:
    func = _dqn_func()
    original = parl.ComputationTask("RL", func())
    for step in range(3):
        original.learn(_batch(step))
    path = str(tmp_path / "RL.pdckpt")
    original.save(path)
    other = parl.ComputationTask("RL", func())
    for step in range(5):
        other.learn(_batch(50 + step))
    other.load(path)
    assert other.update_steps == 3
    batch = _batch(7)
    _assert_same_costs(other.learn(batch), original.learn(batch))
    _assert_same_weights(original, other)


def test_load_rejects_a_file_that_is_not_a_checkpoint(tmp_path) -> None:
    path = tmp_path / "junk.pdckpt"
    import pickle

    path.write_bytes(pickle.dumps({"version": 999}))
    task = parl.ComputationTask("RL", _dqn_func()())
    with pytest.raises(ValueError, match="not a parl checkpoint"):
        task.load(str(path))
