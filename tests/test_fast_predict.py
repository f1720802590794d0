"""ComputationTask's fast prediction path gives the plain path's results, bit for bit.

Two tasks with the same weights and input statistics see the same batches, one
acting the plain way (``fast_predict = False``) and one through
:mod:`parl.serving.fast_predict`; sampled actions are drawn under one seed.
A last test pins the raw kernels of parl.layers to paddle's public ops, so a
paddle upgrade that changes either shows here.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import parl
from parl import layers
from parl.algorithms import A2C, DDPG, DQN, PPO, SAC, TD3
from parl.models import DeterministicActorCritic, GaussianActorCritic, LSTMActorCritic, MLPActorCritic, MLPQModel
from parl.serving.fast_predict import compile_predictor

CASES: Dict[str, Callable[[], parl.Algorithm]] = {
    "DQN-MLPQModel": parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=3), DQN, {}),
    "DQN-MLPQModel-dueling": parl.create_algorithm_func(
        MLPQModel, dict(obs_dim=4, num_actions=3, dueling=True), DQN, {}
    ),
    "PPO-MLPActorCritic-discrete": parl.create_algorithm_func(MLPActorCritic, dict(obs_dim=4, num_actions=3), PPO, {}),
    "PPO-MLPActorCritic-gaussian": parl.create_algorithm_func(MLPActorCritic, dict(obs_dim=4, action_dim=2), PPO, {}),
    "A2C-MLPActorCritic-shared": parl.create_algorithm_func(
        MLPActorCritic, dict(obs_dim=4, num_actions=3, shared=True), A2C, {}
    ),
    "PPO-LSTMActorCritic-discrete": parl.create_algorithm_func(
        LSTMActorCritic, dict(obs_dim=4, num_actions=3, hidden_size=16), PPO, {}
    ),
    "A2C-LSTMActorCritic-gaussian": parl.create_algorithm_func(
        LSTMActorCritic, dict(obs_dim=4, action_dim=2, hidden_size=16), A2C, {}
    ),
    "DDPG-DeterministicActorCritic": parl.create_algorithm_func(
        DeterministicActorCritic, dict(obs_dim=4, action_dim=2, num_critics=1, hidden_sizes=(32, 32)), DDPG, {}
    ),
    "TD3-DeterministicActorCritic": parl.create_algorithm_func(
        DeterministicActorCritic, dict(obs_dim=4, action_dim=2, hidden_sizes=(32, 32)), TD3, {}
    ),
    "SAC-GaussianActorCritic": parl.create_algorithm_func(
        GaussianActorCritic, dict(obs_dim=4, action_dim=2, hidden_sizes=(32, 32)), SAC, {}
    ),
}


def twin_tasks(algorithm_func: Callable[[], parl.Algorithm]):
    """A plain task and a fast one with the same weights and input statistics (both have acted once)."""
    plain = parl.ComputationTask("plain", algorithm_func(), normalize_inputs=True)
    fast = parl.ComputationTask("fast", algorithm_func(), normalize_inputs=True)
    plain.fast_predict = False
    warmup = {"obs": np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32) * 3 + 1}
    for task in (plain, fast):  # builds the layers; the fast task makes its predictor after this
        task.predict(warmup, plain.initial_states(5))
    fast.set_algorithm_weights(plain.algorithm_weights())
    return plain, fast


def batches(task: parl.ComputationTask, batch_size: int, seed: int):
    rng = np.random.default_rng(seed)
    states = task.initial_states(batch_size)
    for step in range(4):
        obs = (rng.standard_normal((batch_size, 4)) * 2 + 0.5).astype(np.float32)
        yield step, {"obs": obs}, {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in states.items()}


def assert_same(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("batch_size", [1, 64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_path_gives_the_plain_results(name: str, batch_size: int) -> None:
    plain, fast = twin_tasks(CASES[name])
    assert callable(fast._predictor), f"{name}: no fast predictor was made"
    for step, inputs, states in batches(plain, batch_size, seed=batch_size):
        for deterministic in (False, True):
            results = []
            for task in (plain, fast):
                paddle.seed(100 + step)
                results.append(task.predict(inputs, states, deterministic=deterministic))
            (plain_actions, plain_states), (fast_actions, fast_states) = results
            assert_same(plain_actions, fast_actions)
            assert_same(plain_states, fast_states)
    # The statistics moved with the sampled batches only, alike in both tasks.
    for key, stats in plain.normalizer.state_dict()["obs"].items():
        np.testing.assert_array_equal(stats, fast.normalizer.state_dict()["obs"][key])
    assert plain.normalizer.stats["obs"].count == 5 + 4 * batch_size


def test_fast_path_leaves_gradients_on_and_inputs_untouched() -> None:
    plain, fast = twin_tasks(CASES["PPO-MLPActorCritic-gaussian"])
    obs = np.ones((3, 4), dtype=np.float32)
    before = obs.copy()
    assert paddle.is_grad_enabled()
    fast.predict({"obs": obs}, {})
    assert paddle.is_grad_enabled()
    np.testing.assert_array_equal(obs, before)


def test_gradient_switch_is_per_thread() -> None:
    """The fast path turns gradients off through the per-thread flag paddle.no_grad uses."""
    seen = []
    inside = threading.Event()
    release = threading.Event()

    def predictor_thread() -> None:
        paddle.set_grad_enabled(False)
        inside.set()
        release.wait(5)

    thread = threading.Thread(target=predictor_thread)
    thread.start()
    try:
        assert inside.wait(5)
        seen.append(paddle.is_grad_enabled())
    finally:
        release.set()
        thread.join(5)
    assert seen == [True]


class CustomQModel(MLPQModel):
    """Overrides ``value``: the fast path must not guess what it does."""

    def value(self, inputs):
        return -super().value(inputs)


def test_unknown_models_act_the_plain_way() -> None:
    algorithm = parl.create_algorithm_func(CustomQModel, dict(obs_dim=4, num_actions=3), DQN, {})()
    task = parl.ComputationTask("custom", algorithm)
    obs = {"obs": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)}
    first, _ = task.predict(obs, {})
    assert task._predictor is False
    second, _ = task.predict(obs, {})
    np.testing.assert_array_equal(first["action"], second["action"])
    with paddle.no_grad():
        q = algorithm.model.value({"obs": paddle.to_tensor(obs["obs"])})
    np.testing.assert_array_equal(first["action"], paddle.argmax(q, axis=-1, keepdim=True).numpy())


def test_a_pair_is_compiled_only_once_its_layers_exist() -> None:
    algorithm = CASES["DQN-MLPQModel"]()
    from parl.serving.fast_predict import LayersNotBuilt

    with pytest.raises(LayersNotBuilt):
        compile_predictor(algorithm)
    task = parl.ComputationTask("dqn", algorithm)
    task.predict({"obs": np.zeros((1, 4), dtype=np.float32)}, {})
    assert callable(task._predictor)


def test_fast_predictions_follow_weight_updates() -> None:
    plain, fast = twin_tasks(CASES["DQN-MLPQModel"])
    weights = plain.algorithm_weights()
    for model_weights in weights.values():
        if isinstance(model_weights, dict) and "hidden.0.w" in model_weights:
            model_weights["q.w"] = -model_weights["q.w"]
    plain.set_algorithm_weights(weights)
    fast.set_algorithm_weights(weights)
    obs = {"obs": np.random.default_rng(3).standard_normal((16, 4)).astype(np.float32)}
    assert_same(plain.predict(obs, {}, deterministic=True)[0], fast.predict(obs, {}, deterministic=True)[0])


ACTIVATIONS: Dict[str, Callable[[paddle.Tensor], paddle.Tensor]] = {
    "relu": F.relu,
    "tanh": paddle.tanh,
    "sigmoid": F.sigmoid,
    "softmax": lambda x: F.softmax(x, axis=-1),
}


@pytest.mark.parametrize("act", [None, *sorted(ACTIVATIONS)])
@pytest.mark.parametrize("rows", [1, 64])
def test_raw_kernels_match_paddles_public_ops(act: Any, rows: int) -> None:
    """FC (and the fast path's chains, which run the same kernels) against paddle.matmul, + and paddle's
    activations: a paddle version whose raw kernels drift from its public ops fails here."""
    layer = layers.fc(64, act=act)
    x = paddle.to_tensor(np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32))
    out = layer(x)
    reference = paddle.matmul(x, layer.params["w"]) + layer.params["b"]
    if act is not None:
        reference = ACTIVATIONS[act](reference)
    np.testing.assert_array_equal(out.numpy(), reference.numpy())


@pytest.mark.parametrize("rows", [1, 7, 64, 256])
@pytest.mark.parametrize("sizes", [(4, 64), (64, 64), (64, 2), (64, 256), (256, 256)])
def test_linear_kernel_matches_matmul_then_add(rows: int, sizes: Any) -> None:
    """The fast path's ``_C_ops.linear`` against FC's ``matmul`` then ``add`` (batch 1 takes a different
    GEMM path in paddle; a fused kernel such as addmm already differs there in the last bit)."""
    from paddle import _C_ops

    rng = np.random.default_rng(rows)
    x, w, b = (
        paddle.to_tensor(rng.standard_normal(shape).astype(np.float32))
        for shape in ((rows, sizes[0]), sizes, sizes[1:])
    )
    np.testing.assert_array_equal(_C_ops.linear(x, w, b).numpy(), (paddle.matmul(x, w) + b).numpy())
