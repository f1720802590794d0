"""Tests of parl.layers: naming, sharing, lazy shapes, numerics, copying, modes."""

from __future__ import annotations

import re
import threading

import numpy as np
import paddle
import pytest

from parl import layers
from parl.layers import training_mode

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def T(a: np.ndarray) -> paddle.Tensor:  # noqa: N802
    return paddle.to_tensor(a)


def sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


# -- names and sharing ------------------------------------------------------


def test_names_are_unique_and_prefixed() -> None:
    a, b = layers.fc(4), layers.fc(4)
    a(T(rand(2, 3)))
    b(T(rand(2, 3)))
    ma, mb = re.fullmatch(r"fc_(\d+)", a.name), re.fullmatch(r"fc_(\d+)", b.name)
    assert ma and mb and a.name != b.name
    assert int(mb.group(1)) == int(ma.group(1)) + 1
    assert a.params["w"].name == f"{a.name}.w" and b.params["b"].name == f"{b.name}.b"
    for make, prefix in [
        (lambda: layers.conv2d(2, 3), "conv2d"),
        (lambda: layers.embedding(5, 2), "embedding"),
        (lambda: layers.lstm(3), "lstm"),
        (lambda: layers.gru(3), "gru"),
        (lambda: layers.layer_norm(), "layer_norm"),
        (lambda: layers.batch_norm(), "batch_norm"),
    ]:
        first, second = make(), make()
        assert re.fullmatch(rf"{prefix}_\d+", first.name) and first.name != second.name


def test_explicit_name_is_used() -> None:
    layer = layers.fc(2, name="policy_head")
    layer(T(rand(1, 3)))
    assert layer.name == "policy_head" and layer.params["w"].name == "policy_head.w"


def test_calling_twice_shares_parameters_and_accumulates_gradients() -> None:
    layer = layers.fc(4)
    x1, x2 = rand(5, 3), rand(2, 3)
    out1 = layer(T(x1))
    w, b = layer.params["w"], layer.params["b"]
    out2 = layer(T(x2))
    assert layer.params["w"] is w and layer.params["b"] is b
    assert layer.parameters() == [b, w]  # suffix order
    (out1.sum() + out2.sum()).backward()
    expected_w = np.repeat((x1.sum(0) + x2.sum(0))[:, None], 4, axis=1)
    np.testing.assert_allclose(w.grad.numpy(), expected_w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 7.0), rtol=1e-6)


def test_recurrent_cell_shares_parameters_across_steps() -> None:
    cell = layers.gru(3)
    h1, _ = cell(T(rand(2, 4)))
    params = dict(cell.params)
    h2, _ = cell(T(rand(2, 4)), h1)
    assert all(cell.params[k] is v for k, v in params.items())
    h2.sum().backward()
    assert cell.params["w_x"].grad is not None and cell.params["w_h"].grad is not None


# -- lazy shapes ------------------------------------------------------------


@pytest.mark.parametrize(
    "make, x, expected",
    [
        (lambda: layers.fc(4), rand(2, 7), {"w": [7, 4], "b": [4]}),
        (lambda: layers.fc(4, bias=False), rand(2, 3, 5), {"w": [5, 4]}),
        (lambda: layers.conv2d(6, (3, 5)), rand(1, 2, 8, 8), {"w": [6, 2, 3, 5], "b": [6]}),
        (lambda: layers.embedding(10, 3), np.array([[1, 2]], dtype="int64"), {"w": [10, 3]}),
        (lambda: layers.lstm(5), rand(2, 3), {"w_x": [3, 20], "w_h": [5, 20], "b": [20]}),
        (lambda: layers.gru(5), rand(2, 3), {"w_x": [3, 15], "w_h": [5, 15], "b_x": [15], "b_h": [15]}),
        (lambda: layers.layer_norm(), rand(2, 3, 9), {"w": [9], "b": [9]}),
        (lambda: layers.batch_norm(), rand(4, 3, 2, 2), {"w": [3], "b": [3], "mean": [3], "var": [3]}),
    ],
)
def test_sizes_are_inferred_on_first_call(make, x, expected) -> None:
    layer = make()
    assert not layer.built and layer.params == {}
    layer(T(x))
    assert layer.built
    assert {k: list(p.shape) for k, p in layer.params.items()} == expected


# -- numerics ---------------------------------------------------------------


def test_fc_matches_numpy() -> None:
    layer = layers.fc(3, act="relu")
    x = rand(4, 5)
    out = layer(T(x)).numpy()
    a = layer.get_arrays()
    np.testing.assert_allclose(out, np.maximum(x @ a["w"] + a["b"], 0), rtol=1e-5, atol=1e-6)


def np_lstm(x, h, c, a):
    gates = x @ a["w_x"] + a["b"] + h @ a["w_h"]
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def np_gru(x, h, a):
    xr, xz, xn = np.split(x @ a["w_x"] + a["b_x"], 3, axis=-1)
    hr, hz, hn = np.split(h @ a["w_h"] + a["b_h"], 3, axis=-1)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def randomize(layer) -> dict:
    arrays = {k: rand(*v.shape) * 0.5 for k, v in layer.get_arrays().items()}
    layer.set_arrays(arrays)
    return arrays


def test_lstm_step_matches_numpy() -> None:
    cell = layers.lstm(4)
    x, h, c = rand(3, 5), rand(3, 4), rand(3, 4)
    cell(T(x))
    a = randomize(cell)
    out, (h1, c1) = cell(T(x), (T(h), T(c)))
    eh, ec = np_lstm(x, h, c, a)
    assert out is h1
    np.testing.assert_allclose(h1.numpy(), eh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c1.numpy(), ec, rtol=1e-5, atol=1e-6)


def test_lstm_default_state_is_zero_and_forget_bias_is_one() -> None:
    cell = layers.lstm(3)
    x = rand(2, 4)
    out, (h, c) = cell(T(x))
    b = cell.get_arrays()["b"]
    np.testing.assert_array_equal(b, np.r_[np.zeros(3), np.ones(3), np.zeros(6)])
    eh, ec = np_lstm(x, np.zeros((2, 3)), np.zeros((2, 3)), cell.get_arrays())
    np.testing.assert_allclose(h.numpy(), eh, rtol=1e-5, atol=1e-6)


def test_gru_step_matches_numpy() -> None:
    cell = layers.gru(4)
    x, h = rand(3, 5), rand(3, 4)
    cell(T(x), T(h))
    a = randomize(cell)
    out, h1 = cell(T(x), T(h))
    assert out is h1
    np.testing.assert_allclose(h1.numpy(), np_gru(x, h, a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_unroll_equals_stepping(kind) -> None:
    cell = getattr(layers, kind)(3)
    xs = rand(2, 5, 4)
    state = (T(rand(2, 3)), T(rand(2, 3))) if kind == "lstm" else T(rand(2, 3))
    outs, final = cell.unroll(T(xs), state)
    assert list(outs.shape) == [2, 5, 3]
    s = state
    for t in range(5):
        out, s = cell(T(xs[:, t]), s)
        np.testing.assert_allclose(outs.numpy()[:, t], out.numpy(), rtol=1e-5, atol=1e-6)
    for got, want in zip(paddle.utils.flatten(final), paddle.utils.flatten(s)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_recurrent_bad_state_raises() -> None:
    lstm, gru = layers.lstm(3), layers.gru(3)
    with pytest.raises(ValueError, match="tuple"):
        lstm(T(rand(2, 4)), T(rand(2, 3)))
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        gru(T(rand(2, 4)), T(rand(2, 5)))
    with pytest.raises(ValueError, match="batch, time"):
        gru.unroll(T(rand(2, 4)))


def test_layer_norm_matches_numpy() -> None:
    layer = layers.layer_norm(epsilon=1e-5)
    x = rand(2, 3, 6) * 3 + 1
    layer(T(x))
    a = randomize(layer)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * a["w"] + a["b"]
    np.testing.assert_allclose(layer(T(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_conv2d_shapes_and_1x1_numerics() -> None:
    x = rand(2, 3, 10, 10)
    assert list(layers.conv2d(8, 3, stride=2, padding=1)(T(x)).shape) == [2, 8, 5, 5]
    assert list(layers.conv2d(4, (3, 5), padding=(1, 2))(T(x)).shape) == [2, 4, 10, 10]
    assert list(layers.conv2d(4, 3)(T(x)).shape) == [2, 4, 8, 8]
    one = layers.conv2d(5, 1, act="tanh")
    out = one(T(x)).numpy()
    a = one.get_arrays()
    expected = np.tanh(np.einsum("nchw,oc->nohw", x, a["w"][:, :, 0, 0]) + a["b"][None, :, None, None])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_conv2d_rejects_non_nchw_input() -> None:
    with pytest.raises(ValueError, match="NCHW"):
        layers.conv2d(2, 3)(T(rand(2, 3)))


def test_embedding_rows_of_table() -> None:
    layer = layers.embedding(7, 3)
    ids = np.array([[0, 6, 2], [2, 2, 5]], dtype="int64")
    out = layer(T(ids))
    table = layer.get_arrays()["w"]
    assert out.dtype == paddle.float32 and list(out.shape) == [2, 3, 3]
    np.testing.assert_array_equal(out.numpy(), table[ids])
    np.testing.assert_array_equal(layer(T(np.array([4], dtype="int64"))).numpy(), table[[4]])


# -- batch norm and modes ----------------------------------------------------


def test_batch_norm_train_mode_uses_batch_stats_and_updates_running() -> None:
    bn = layers.batch_norm(momentum=0.9, epsilon=1e-5)
    x = rand(16, 3) * 2 + 5
    out = bn(T(x)).numpy()
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    a = bn.get_arrays()
    np.testing.assert_allclose(a["mean"], 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(a["var"], 0.9 + 0.1 * var, rtol=1e-5)
    bn(T(x))
    a2 = bn.get_arrays()
    assert np.all(np.abs(a2["mean"] - mean) < np.abs(a["mean"] - mean))
    assert [p.name for p in bn.parameters()] == [f"{bn.name}.b", f"{bn.name}.w"]  # suffix order
    assert bn.params["mean"].stop_gradient and bn.params["var"].stop_gradient


def test_batch_norm_eval_uses_running_stats_and_changes_nothing() -> None:
    bn = layers.batch_norm()
    x = rand(4, 3, 2, 2)
    bn(T(x))
    a = randomize(bn)
    a["var"] = np.abs(a["var"]) + 0.5
    bn.set_arrays(a)
    with training_mode(False):
        assert not layers.is_training()
        out = bn(T(x)).numpy()
    assert layers.is_training()
    c = (slice(None), None, None)
    expected = (x - a["mean"][c]) / np.sqrt(a["var"][c] + 1e-5) * a["w"][c] + a["b"][c]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    for k, v in bn.get_arrays().items():
        np.testing.assert_array_equal(v, a[k])


def test_batch_norm_gradient_reaches_scale_and_shift() -> None:
    bn = layers.batch_norm()
    (bn(T(rand(8, 2))) * T(rand(8, 2))).sum().backward()
    assert bn.params["w"].grad is not None and bn.params["b"].grad is not None
    assert bn.params["mean"].grad is None


def test_training_mode_is_per_thread() -> None:
    seen = {}

    def probe(key: str) -> None:
        seen[key] = layers.is_training()

    with training_mode(False):
        thread = threading.Thread(target=probe, args=("other",))
        thread.start()
        thread.join()
        probe("main")

    def eval_thread() -> None:
        with training_mode(False):
            seen["inner"] = layers.is_training()
            barrier.wait()
            barrier.wait()

    barrier = threading.Barrier(2)
    thread = threading.Thread(target=eval_thread)
    thread.start()
    barrier.wait()
    probe("main_while_other_eval")
    barrier.wait()
    thread.join()
    assert seen == {"other": True, "main": False, "inner": False, "main_while_other_eval": True}


def test_training_mode_nests_and_restores() -> None:
    with training_mode(False):
        with training_mode(True):
            assert layers.is_training()
        assert not layers.is_training()
    assert layers.is_training()


# -- copying and setting values ---------------------------------------------


def test_assign_from_hard_and_polyak() -> None:
    src, dst = layers.fc(4), layers.fc(4)
    x = T(rand(2, 3))
    src(x)
    dst(x)
    s0, d0 = src.get_arrays(), dst.get_arrays()
    s0["b"] = rand(4)
    src.set_arrays(s0)
    dst.assign_from(src, decay=0.9)
    for k, v in dst.get_arrays().items():
        np.testing.assert_allclose(v, 0.9 * d0[k] + 0.1 * s0[k], rtol=1e-6, atol=1e-7)
    dst.assign_from(src, decay=0.0)
    for k, v in dst.get_arrays().items():
        np.testing.assert_array_equal(v, s0[k])
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    assert dst.params["w"] is not src.params["w"]


def test_assign_from_builds_unbuilt_layer() -> None:
    src, dst = layers.lstm(3), layers.lstm(3)
    x = T(rand(2, 4))
    src(x)
    dst.assign_from(src, decay=0.0)
    assert dst.built and list(dst.params) == list(src.params)
    assert dst.params["w_x"].name == f"{dst.name}.w_x"
    np.testing.assert_array_equal(dst(x)[0].numpy(), src(x)[0].numpy())


@pytest.mark.parametrize("make, x", [(lambda: layers.fc(4), rand(2, 3)), (lambda: layers.lstm(3), rand(2, 4))])
def test_a_layer_built_from_arrays_lists_its_parameters_as_one_built_by_a_call(make, x) -> None:
    # An optimizer takes the parameters in this order, and a global gradient norm sums in it: a
    # layer restored from a checkpoint (arrays in any order) must not update 1 ulp differently.
    called, restored = make(), make()
    called(T(x))
    arrays = called.get_arrays()
    restored.set_arrays({suffix: arrays[suffix] for suffix in reversed(list(arrays))})
    assert list(restored.params) == list(called.params)
    assert [p.name.rpartition(".")[2] for p in restored.parameters()] == [
        p.name.rpartition(".")[2] for p in called.parameters()
    ]


def test_assign_from_copies_batch_norm_statistics() -> None:
    src, dst = layers.batch_norm(), layers.batch_norm()
    src(T(rand(8, 3) + 2))
    dst.assign_from(src, decay=0.0)
    for k, v in src.get_arrays().items():
        np.testing.assert_array_equal(dst.get_arrays()[k], v)
    assert dst.params["mean"].stop_gradient and not dst.params["w"].stop_gradient
    assert len(dst.parameters()) == 2


def test_assign_from_mismatch_raises() -> None:
    a, b = layers.fc(4), layers.fc(4)
    a(T(rand(1, 3)))
    b(T(rand(1, 5)))
    with pytest.raises(ValueError, match=re.escape(f"{a.name}.w")):
        b.assign_from(a, decay=0.0)
    with pytest.raises(ValueError, match="no parameters yet"):
        b.assign_from(layers.fc(4), decay=0.0)
    c = layers.fc(4, bias=False)
    c(T(rand(1, 3)))
    with pytest.raises(ValueError, match="differ"):
        c.assign_from(a, decay=0.0)


def test_set_arrays_bad_shape_or_suffix_names_parameter() -> None:
    layer = layers.fc(4)
    layer(T(rand(1, 3)))
    arrays = layer.get_arrays()
    with pytest.raises(ValueError, match=re.escape(f"{layer.name}.w")):
        layer.set_arrays({**arrays, "w": np.zeros((5, 4), "float32")})
    with pytest.raises(ValueError, match=rf"{layer.name}.*'x'"):
        layer.set_arrays({"w": arrays["w"], "x": arrays["b"]})
    with pytest.raises(ValueError, match=layer.name):
        layer.set_arrays({"w": arrays["w"]})


# -- constructor validation ---------------------------------------------------


@pytest.mark.parametrize(
    "make, bad",
    [
        (lambda: layers.fc(0), "0"),
        (lambda: layers.fc(4, act="swishy"), "'swishy'"),
        (lambda: layers.conv2d(0, 3), "0"),
        (lambda: layers.conv2d(4, 0), "0"),
        (lambda: layers.conv2d(4, (3, 3, 3)), "(3, 3, 3)"),
        (lambda: layers.conv2d(4, 3, padding=-1), "-1"),
        (lambda: layers.conv2d(4, 3, act="nope"), "'nope'"),
        (lambda: layers.embedding(0, 4), "0"),
        (lambda: layers.embedding(4, 2.5), "2.5"),
        (lambda: layers.lstm(0), "0"),
        (lambda: layers.gru(-2), "-2"),
        (lambda: layers.layer_norm(epsilon=0), "0"),
        (lambda: layers.batch_norm(momentum=1.0), "1.0"),
    ],
)
def test_bad_constructor_arguments_raise(make, bad) -> None:
    with pytest.raises(ValueError, match=re.escape(bad)):
        make()
