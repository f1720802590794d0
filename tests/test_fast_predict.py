"""Compiled predictors (``Algorithm.compile_predict``) give ``predict``'s results, bit for bit.

Each algorithm and model pair is checked twice: through its ``compile_predict()``
directly, and through two tasks with the same weights and input statistics that
see the same batches, one acting through ``predict`` (``fast_predict = False``)
and one through the compiled predictor. Sampled actions are drawn under one seed.
A subclass that replaces ``predict`` (or a model method a predictor stands in
for) acts through its own code. The last tests pin the raw kernels of
parl.layers (FC.fast's ``_C_ops.linear`` included) to paddle's public ops, so a
paddle upgrade that changes either shows here.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import parl
from parl import layers
from parl.algorithms import A2C, DDPG, DQN, PPO, SAC, TD3, PolicyGradient
from parl.layers import LayersNotBuilt
from parl.models import DeterministicActorCritic, GaussianActorCritic, LSTMActorCritic, MLPActorCritic, MLPQModel

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
    "PolicyGradient-MLPActorCritic-gaussian-shared": parl.create_algorithm_func(
        MLPActorCritic, dict(obs_dim=4, action_dim=2, shared=True, hidden_sizes=(16,)), PolicyGradient, {}
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


def tensors(arrays: Dict[str, np.ndarray]) -> Dict[str, paddle.Tensor]:
    return {k: paddle.to_tensor(v) for k, v in arrays.items()}


def numpy_of(result: Tuple[Dict[str, paddle.Tensor], Dict[str, paddle.Tensor]]):
    actions, next_states = result
    return {k: v.numpy() for k, v in actions.items()}, {k: v.numpy() for k, v in next_states.items()}


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
    return batches_for(task.algorithm.model, task.initial_states(batch_size), batch_size, seed)


def batches_for(model: parl.Model, states: Dict[str, np.ndarray], batch_size: int, seed: int):
    rng = np.random.default_rng(seed)
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
def test_compiled_predictor_gives_what_predict_gives(name: str, batch_size: int) -> None:
    """Through ``compile_predict()`` itself: the compiled predictor against ``predict`` on one algorithm."""
    algorithm = CASES[name]()
    model = algorithm.model
    states = parl.ComputationTask("specs", algorithm).initial_states(batch_size)
    with paddle.no_grad():
        algorithm.predict(
            tensors({"obs": np.zeros((1, 4), np.float32)}), tensors({k: v[:1] for k, v in states.items()})
        )
    predictor = algorithm.compile_predict()
    assert callable(predictor), f"{name}: no compiled predictor"
    for step, inputs, step_states in batches_for(model, states, batch_size, seed=batch_size):
        for deterministic in (False, True):
            with paddle.no_grad():
                paddle.seed(100 + step)
                expected = numpy_of(
                    algorithm.predict(tensors(inputs), tensors(step_states), deterministic=deterministic)
                )
                paddle.seed(100 + step)
                got = numpy_of(predictor(tensors(inputs), tensors(step_states), deterministic))
            assert_same(expected[0], got[0])
            assert_same(expected[1], got[1])


@pytest.mark.parametrize("batch_size", [1, 64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_path_gives_the_plain_results(name: str, batch_size: int) -> None:
    """Through two tasks, with input normalization: the task's fast path against its plain path."""
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
    """Overrides ``value``: the compiled path must not guess what it does."""

    def value(self, inputs):
        return -super().value(inputs)


def test_models_that_override_a_compiled_method_act_the_plain_way() -> None:
    algorithm = parl.create_algorithm_func(CustomQModel, dict(obs_dim=4, num_actions=3), DQN, {})()
    task = parl.ComputationTask("custom", algorithm)
    obs = {"obs": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)}
    first, _ = task.predict(obs, {})
    assert algorithm.model.compile_value() is None and algorithm.compile_predict() is None
    assert task._predictor is False
    second, _ = task.predict(obs, {})
    np.testing.assert_array_equal(first["action"], second["action"])
    with paddle.no_grad():
        q = algorithm.model.value({"obs": paddle.to_tensor(obs["obs"])})
    np.testing.assert_array_equal(first["action"], paddle.argmax(q, axis=-1, keepdim=True).numpy())


class FirstActionDQN(DQN):
    """A user's DQN that replaces ``predict``: DQN's compiled predictor must not stand in for it."""

    def predict(self, inputs, states, *, deterministic=False):
        return {"action": paddle.zeros([inputs["obs"].shape[0], 1], dtype="int64")}, {}


class SecondActionDQN(FirstActionDQN):
    """Below the class that replaced ``predict``: still no compiled predictor."""


class OwnCompiledDQN(FirstActionDQN):
    """Replaces ``predict`` and brings a compiled predictor of its own: that one is used."""

    def compile_predict(self):
        return lambda inputs, states, deterministic: self.predict(inputs, states)


@pytest.mark.parametrize("algorithm_class", [FirstActionDQN, SecondActionDQN])
def test_a_subclass_that_overrides_predict_acts_through_it(algorithm_class: type) -> None:
    algorithm = parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=3), algorithm_class, {})()
    task = parl.ComputationTask("user", algorithm)
    obs = {"obs": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)}
    for _ in range(3):
        actions, _ = task.predict(obs, {})
        np.testing.assert_array_equal(actions["action"], np.zeros((8, 1), np.int64))
    assert task._predictor is False
    with paddle.no_grad():
        algorithm.model.value({"obs": paddle.zeros([1, 4])})  # builds the layers, which this predict never calls
    assert algorithm.model.compile_value() is not None  # the model has a compiled value; the algorithm
    assert algorithm.compile_predict() is None  # does not use it, as its predict is not DQN's


def test_a_subclass_with_its_own_compiled_predictor_acts_through_that() -> None:
    algorithm = parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=3), OwnCompiledDQN, {})()
    task = parl.ComputationTask("user", algorithm)
    obs = {"obs": np.ones((2, 4), np.float32)}
    task.predict(obs, {})
    assert callable(task._predictor)
    np.testing.assert_array_equal(task.predict(obs, {})[0]["action"], np.zeros((2, 1), np.int64))


class Hookless(parl.Algorithm):
    """An algorithm with ``predict`` only: the base hook gives no compiled predictor."""

    def predict(self, inputs, states, *, deterministic=False):
        return {"action": paddle.argmax(self.model.value(inputs), axis=-1, keepdim=True) * 0 + 1}, {}


def test_an_algorithm_without_the_hook_acts_through_predict() -> None:
    algorithm = Hookless(lambda: MLPQModel(obs_dim=4, num_actions=3))
    task = parl.ComputationTask("hookless", algorithm)
    obs = {"obs": np.zeros((3, 4), np.float32)}
    for _ in range(3):
        np.testing.assert_array_equal(task.predict(obs, {})[0]["action"], np.ones((3, 1), np.int64))
    assert algorithm.compile_predict() is None and task._predictor is False


def test_a_pair_is_compiled_only_once_its_layers_exist() -> None:
    algorithm = CASES["DQN-MLPQModel"]()
    with pytest.raises(LayersNotBuilt, match="fc_"):
        algorithm.compile_predict()
    task = parl.ComputationTask("dqn", algorithm)
    task.predict({"obs": np.zeros((1, 4), dtype=np.float32)}, {})
    assert callable(task._predictor)


class NormQModel(MLPQModel):
    """A batch_norm layer in the trunk: it reads the mode, so the compiled path must run in eval mode."""

    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__(obs_dim, num_actions, hidden_sizes=(16,))
        self.hidden = [self.hidden[0], layers.batch_norm()]


def test_compiled_predictors_run_in_eval_mode_where_a_layer_reads_it() -> None:
    plain, fast = twin_tasks(parl.create_algorithm_func(NormQModel, dict(obs_dim=4, num_actions=3), DQN, {}))
    norm = fast.algorithm.model.hidden[1]
    # Statistics away from their initial values, so batch statistics would give other actions.
    weights = plain.algorithm_weights()
    model_weights = weights["model"]
    model_weights["hidden.1.mean"] = np.linspace(-1, 1, 16).astype(np.float32)
    model_weights["hidden.1.var"] = np.linspace(0.5, 3, 16).astype(np.float32)
    plain.set_algorithm_weights(weights)
    fast.set_algorithm_weights(weights)
    before = norm.get_arrays()
    for _, inputs, states in batches(plain, 32, seed=5):
        assert_same(plain.predict(inputs, states)[0], fast.predict(inputs, states)[0])
    assert callable(fast._predictor)
    for key, value in norm.get_arrays().items():  # eval mode: the running statistics stay
        np.testing.assert_array_equal(value, before[key], err_msg=key)


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
    """FC and FC.fast() against paddle.matmul, + and paddle's activations: a paddle version whose raw
    kernels drift from its public ops fails here."""
    layer = layers.fc(64, act=act)
    x = paddle.to_tensor(np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32))
    out = layer(x)
    reference = paddle.matmul(x, layer.params["w"]) + layer.params["b"]
    if act is not None:
        reference = ACTIVATIONS[act](reference)
    np.testing.assert_array_equal(out.numpy(), reference.numpy())
    np.testing.assert_array_equal(layer.fast()(x).numpy(), reference.numpy())


@pytest.mark.parametrize("act", [None, "tanh"])
def test_fast_fc_without_bias_matches_the_layer(act: Any) -> None:
    layer = layers.fc(8, act=act, bias=False)
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    expected = layer(x).numpy()  # builds the layer
    np.testing.assert_array_equal(layer.fast()(x).numpy(), expected)


@pytest.mark.parametrize("rows", [1, 7, 64, 256])
@pytest.mark.parametrize("sizes", [(4, 64), (64, 64), (64, 2), (64, 256), (256, 256)])
def test_linear_kernel_matches_matmul_then_add(rows: int, sizes: Any) -> None:
    """FC.fast()'s ``_C_ops.linear`` against FC's ``matmul`` then ``add`` (batch 1 takes a different
    GEMM path in paddle; a fused kernel such as addmm already differs there in the last bit)."""
    from paddle import _C_ops

    rng = np.random.default_rng(rows)
    x, w, b = (
        paddle.to_tensor(rng.standard_normal(shape).astype(np.float32))
        for shape in ((rows, sizes[0]), sizes, sizes[1:])
    )
    np.testing.assert_array_equal(_C_ops.linear(x, w, b).numpy(), (paddle.matmul(x, w) + b).numpy())


@pytest.mark.parametrize("head", [dict(num_actions=3), dict(action_dim=2)])
def test_compiled_policies_compute_only_what_the_action_needs(head: Dict[str, int], monkeypatch) -> None:
    """No value head, and for the mode no log-probabilities (categorical) or standard deviation (Gaussian)."""
    from parl.layers import distributions

    model = MLPActorCritic(obs_dim=4, **head)
    obs = {"obs": paddle.to_tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))}
    with paddle.no_grad():
        plain_dist, _, _ = model.step(obs, {})
    made, ran = [], []

    def count(layer: layers.LayerFunc, name: str) -> None:
        original = layer.fast

        def fast():
            made.append(name)
            call = original()
            return lambda x: ran.append(name) or call(x)

        monkeypatch.setattr(layer, "fast", fast)

    count(model.critic, "critic")
    if not model.discrete:
        count(model.sigma, "sigma")
    log_softmax = distributions.F.log_softmax
    monkeypatch.setattr(
        distributions.F, "log_softmax", lambda x, axis: ran.append("log_softmax") or log_softmax(x, axis)
    )
    policy = model.compile_policy()
    assert "critic" not in made
    with paddle.no_grad():
        dist, value, next_states = policy(obs, {})
        mode = dist.mode()
        assert value is None and next_states == {} and ran == []
        dist.sample()  # a sample needs them: the counters see it
    assert ran == (["log_softmax"] if model.discrete else ["sigma"])
    np.testing.assert_array_equal(mode.numpy(), plain_dist.mode().numpy())


def test_categorical_log_probs_keep_the_gradient_mode_of_their_logits() -> None:
    """Logits with gradient get their log-probabilities at once, so a later read under no_grad still has them."""
    from parl.layers.distributions import Categorical

    logits = paddle.to_tensor(np.array([[0.5, -1.0, 2.0]], np.float32), stop_gradient=False)
    dist = Categorical(logits)
    with paddle.no_grad():
        log_probs = dist.log_probs
    assert not log_probs.stop_gradient
    log_probs.sum().backward()
    assert logits.grad is not None
