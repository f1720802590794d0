"""ComputationTask around the algorithm: input normalization, reward transforms, multi-step learn,
checked hyperparameter names, and target-network syncs."""

from __future__ import annotations

import os
from typing import Dict, List

import numpy as np
import paddle
import pytest

import parl
from parl.algorithms import DQN
from parl.algorithms.target import TargetSync
from parl.models import MLPQModel
from parl.serving.computation_task import NORMALIZER_KEY

from toys import EchoModel

MIXED_INPUTS = [("obs", dict(shape=[2], dtype="float32")), ("id", dict(shape=[1], dtype="int64"))]


def mixed_model() -> EchoModel:
    return EchoModel(input_specs=MIXED_INPUTS)


class RecordingAlgorithm(parl.Algorithm):
    """Records the inputs, next inputs and rewards it is given; learns a regression of the reward on obs."""

    def __init__(self, model_func=mixed_model) -> None:
        super().__init__(model_func, learning_rate=0.1)
        self.predicted: List[Dict[str, np.ndarray]] = []
        self.deterministic: List[bool] = []
        self.learned: List[Dict[str, Dict[str, np.ndarray]]] = []

    def predict(self, inputs, states, *, deterministic=False):
        self.predicted.append({k: v.numpy() for k, v in inputs.items()})
        self.deterministic.append(deterministic)
        return {"action": paddle.zeros([inputs["obs"].shape[0], 1], dtype="int64")}, {}

    def learn(self, batch):
        self.learned.append(
            {
                "inputs": {k: v.numpy() for k, v in batch.inputs.items()},
                "next_inputs": {k: v.numpy() for k, v in batch.next_inputs.items()},
                "rewards": {k: v.numpy() for k, v in batch.rewards.items()},
            }
        )
        error = self.model.fc(batch.inputs["obs"]) - batch.rewards["reward"]
        return {"loss": (error * error).mean()}


def obs_batch(rng: np.random.Generator, n: int, loc: float = 3.0, scale: float = 2.0) -> Dict[str, np.ndarray]:
    return {
        "obs": rng.normal(loc, scale, (n, 2)).astype(np.float32),
        "id": rng.integers(0, 100, (n, 1)).astype(np.int64),
    }


def learn_batch(inputs, next_inputs, rewards=None) -> parl.Transition:
    n = len(inputs["obs"])
    return parl.Transition(
        inputs=inputs,
        next_inputs=next_inputs,
        states={},
        next_states={},
        actions={"action": np.zeros((n, 1), np.int64)},
        rewards={"reward": np.ones((n, 1), np.float32) if rewards is None else rewards},
        next_episode_end=np.zeros((n, 1), np.float32),
    )


def normalizing_task(**kwargs) -> parl.ComputationTask:
    return parl.ComputationTask("T", RecordingAlgorithm(), **{"normalize_inputs": True, **kwargs})


def stats_of(task: parl.ComputationTask) -> dict:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in task.normalizer.state_dict()["obs"].items()}


def assert_same_stats(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


# -- input normalization ------------------------------------------------------------------


def test_normalize_inputs_true_normalizes_every_float_input_and_only_those() -> None:
    task = normalizing_task()
    assert set(task.normalizer.stats) == {"obs"}
    assert parl.ComputationTask("T", RecordingAlgorithm()).normalizer is None
    assert parl.ComputationTask("T", RecordingAlgorithm(), normalize_inputs=[]).normalizer is None
    assert set(parl.ComputationTask("T", RecordingAlgorithm(), normalize_inputs=["obs"]).normalizer.stats) == {"obs"}


def test_inputs_are_normalized_identically_in_predict_and_learn() -> None:
    rng = np.random.default_rng(0)
    task = normalizing_task()
    for _ in range(3):
        task.predict(obs_batch(rng, 16), {})
    probe, next_probe = obs_batch(rng, 5), obs_batch(rng, 5)
    task.predict(probe, {}, deterministic=True)  # deterministic: sees the inputs without updating statistics
    task.learn(learn_batch(probe, next_probe))
    seen_in_predict = task.algorithm.predicted[-1]
    seen_in_learn = task.algorithm.learned[-1]
    np.testing.assert_array_equal(seen_in_learn["inputs"]["obs"], seen_in_predict["obs"])
    np.testing.assert_array_equal(seen_in_learn["inputs"]["id"], probe["id"])  # integer inputs pass through
    np.testing.assert_array_equal(seen_in_predict["id"], probe["id"])

    # The values are (x - mean) / sqrt(var + eps) with the statistics of the three acting batches.
    stats = task.normalizer.stats["obs"]
    expected = (probe["obs"] - stats.mean) / np.sqrt(stats.var + 1e-8)
    np.testing.assert_allclose(seen_in_predict["obs"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        seen_in_learn["next_inputs"]["obs"], (next_probe["obs"] - stats.mean) / np.sqrt(stats.var + 1e-8), rtol=1e-5
    )
    assert not np.allclose(seen_in_predict["obs"], probe["obs"])


def test_statistics_are_updated_by_predict_but_not_by_deterministic_predict_or_learn() -> None:
    rng = np.random.default_rng(1)
    task = normalizing_task()
    batches = [obs_batch(rng, 8), obs_batch(rng, 3, loc=-5.0)]
    for batch in batches:
        task.predict(batch, {})
    after_predict = stats_of(task)
    everything = np.concatenate([b["obs"] for b in batches]).astype(np.float64)
    np.testing.assert_allclose(after_predict["mean"], everything.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(after_predict["var"], everything.var(axis=0), rtol=1e-6)
    assert after_predict["count"] == 11

    task.predict(obs_batch(rng, 20, loc=100.0), {}, deterministic=True)
    assert task.algorithm.deterministic[-1] is True
    assert_same_stats(stats_of(task), after_predict)
    task.learn(learn_batch(obs_batch(rng, 20, loc=-100.0), obs_batch(rng, 20, loc=50.0)))
    assert_same_stats(stats_of(task), after_predict)


def test_input_clip_bounds_the_normalized_inputs() -> None:
    rng = np.random.default_rng(2)
    task = normalizing_task(input_clip=1.5)
    task.predict(obs_batch(rng, 50, loc=0.0, scale=1.0), {})
    far = {"obs": np.array([[1e3, -1e3]], np.float32), "id": np.array([[1]], np.int64)}
    task.predict(far, {}, deterministic=True)
    np.testing.assert_allclose(task.algorithm.predicted[-1]["obs"], [[1.5, -1.5]])
    task.learn(learn_batch(far, far))
    np.testing.assert_allclose(task.algorithm.learned[-1]["inputs"]["obs"], [[1.5, -1.5]])


@pytest.mark.parametrize("names, bad", [(["obs", "nope"], "nope"), (["id"], "id")], ids=["unknown", "integer"])
def test_normalize_inputs_naming_an_unknown_or_non_float_input_raises(names, bad) -> None:
    with pytest.raises(ValueError) as info:
        parl.ComputationTask("T", RecordingAlgorithm(), normalize_inputs=names)
    assert repr(bad) in str(info.value) and "'obs'" in str(info.value)


def test_normalize_inputs_of_another_type_raises() -> None:
    with pytest.raises(ValueError, match="normalize_inputs"):
        parl.ComputationTask("T", RecordingAlgorithm(), normalize_inputs="obs")


# -- statistics in checkpoints and weights -----------------------------------------------------


def trained_normalizing_task(rng: np.random.Generator) -> parl.ComputationTask:
    task = normalizing_task()
    for _ in range(3):
        task.predict(obs_batch(rng, 10, loc=rng.normal() * 5), {})
    task.learn(learn_batch(obs_batch(rng, 4), obs_batch(rng, 4)))
    return task


def test_save_and_load_restore_the_statistics(tmp_path) -> None:
    rng = np.random.default_rng(3)
    task = trained_normalizing_task(rng)
    path = os.path.join(tmp_path, "T.pdckpt")
    task.save(path)
    restored = normalizing_task()
    restored.load(path)
    assert_same_stats(stats_of(restored), stats_of(task))
    probe = obs_batch(rng, 4)
    task.predict(probe, {}, deterministic=True)
    restored.predict(probe, {}, deterministic=True)
    np.testing.assert_array_equal(restored.algorithm.predicted[-1]["obs"], task.algorithm.predicted[-1]["obs"])


def test_algorithm_weights_carry_the_statistics() -> None:
    rng = np.random.default_rng(4)
    task = trained_normalizing_task(rng)
    weights = task.algorithm_weights()
    assert NORMALIZER_KEY in weights and "model" in weights
    other = normalizing_task()
    other.set_algorithm_weights(weights)
    assert_same_stats(stats_of(other), stats_of(task))
    for key, value in task.algorithm.model.get_weights().items():
        np.testing.assert_array_equal(other.algorithm.model.get_weights()[key], value)
    # The snapshot is a copy: later predictions do not change it.
    count = weights[NORMALIZER_KEY]["obs"]["count"].copy()
    task.predict(obs_batch(rng, 5), {})
    np.testing.assert_array_equal(weights[NORMALIZER_KEY]["obs"]["count"], count)
    assert NORMALIZER_KEY not in parl.ComputationTask("T", RecordingAlgorithm()).algorithm_weights()


def test_a_checkpoint_with_statistics_does_not_load_into_a_task_without_a_normalizer(tmp_path) -> None:
    path = os.path.join(tmp_path, "with.pdckpt")
    trained_normalizing_task(np.random.default_rng(5)).save(path)
    plain = parl.ComputationTask("T", RecordingAlgorithm())
    with pytest.raises(ValueError, match="normaliz"):
        plain.load(path)


def test_a_checkpoint_without_statistics_does_not_load_into_a_normalizing_task(tmp_path) -> None:
    path = os.path.join(tmp_path, "without.pdckpt")
    plain = parl.ComputationTask("T", RecordingAlgorithm())
    plain.learn(learn_batch(obs_batch(np.random.default_rng(6), 4), obs_batch(np.random.default_rng(7), 4)))
    plain.save(path)
    with pytest.raises(ValueError, match="normaliz"):
        normalizing_task().load(path)


def test_weights_with_and_without_statistics_do_not_cross() -> None:
    rng = np.random.default_rng(8)
    with pytest.raises(ValueError, match="normaliz"):
        parl.ComputationTask("T", RecordingAlgorithm()).set_algorithm_weights(
            trained_normalizing_task(rng).algorithm_weights()
        )
    plain = parl.ComputationTask("T", RecordingAlgorithm())
    plain.learn(learn_batch(obs_batch(rng, 4), obs_batch(rng, 4)))
    with pytest.raises(ValueError, match="normaliz"):
        normalizing_task().set_algorithm_weights(plain.algorithm_weights())


def test_a_refused_checkpoint_leaves_the_task_unchanged(tmp_path) -> None:
    """A load that raises must not have replaced part of the task's state first."""
    rng = np.random.default_rng(9)
    path = os.path.join(tmp_path, "with.pdckpt")
    source = trained_normalizing_task(rng)
    for _ in range(3):
        source.learn(learn_batch(obs_batch(rng, 4), obs_batch(rng, 4)))
    source.save(path)
    plain = parl.ComputationTask("T", RecordingAlgorithm())
    plain.learn(learn_batch(obs_batch(rng, 4), obs_batch(rng, 4)))
    before, steps_before = plain.algorithm.model.get_weights(), plain.update_steps
    with pytest.raises(ValueError):
        plain.load(path)
    assert plain.update_steps == steps_before, "update_steps was taken from the refused checkpoint"
    for key, value in plain.algorithm.model.get_weights().items():
        np.testing.assert_array_equal(value, before[key], err_msg=f"{key} was taken from the refused checkpoint")


# -- reward transforms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(reward_scale=0.1), [[0.1], [-2.0], [0.5]]),
        (dict(reward_clip=2.0), [[1.0], [-2.0], [2.0]]),
        (dict(reward_scale=0.5, reward_clip=1.0), [[0.5], [-1.0], [1.0]]),
        (dict(), [[1.0], [-20.0], [5.0]]),
    ],
)
def test_reward_scale_and_clip_are_applied_to_learns_rewards(kwargs, expected) -> None:
    task = parl.ComputationTask("T", RecordingAlgorithm(), **kwargs)
    rng = np.random.default_rng(10)
    rewards = np.array([[1.0], [-20.0], [5.0]], np.float32)
    task.learn(learn_batch(obs_batch(rng, 3), obs_batch(rng, 3), rewards))
    np.testing.assert_allclose(task.algorithm.learned[-1]["rewards"]["reward"], expected, rtol=1e-6)
    np.testing.assert_array_equal(rewards, [[1.0], [-20.0], [5.0]])  # the caller's batch is not changed


# -- multi-step learn -----------------------------------------------------------------------


class SteppingAlgorithm(parl.Algorithm):
    """``learn`` is a generator of ``steps`` optimizer steps; snapshots the weights before each loss."""

    def __init__(self, model_func=EchoModel, *, steps: int = 3, extra=None) -> None:
        super().__init__(model_func, learning_rate=0.05)
        self.steps = steps
        self.extra = extra  # name -> callable(batch size) giving an additional cost
        self.snapshots: List[Dict[str, np.ndarray]] = []
        self.after_updates: List[int] = []

    def predict(self, inputs, states, *, deterministic=False):
        return {"action": paddle.zeros([inputs["obs"].shape[0], 1], dtype="int64")}, {}

    def learn(self, batch):
        for i in range(self.steps):
            error = self.model.fc(batch.inputs["obs"]) - batch.rewards["reward"]
            self.snapshots.append(self.model.get_weights())
            costs = {"loss": (error * error).mean(), "index": paddle.full([], float(i))}
            if self.extra:
                costs.update({k: f(error) for k, f in self.extra.items()})
            yield costs

    def after_update(self, update_step: int) -> None:
        self.after_updates.append(update_step)


def toy_batch(rows: int = 4) -> parl.Transition:
    obs = np.stack([np.arange(rows, dtype=np.float32), np.ones(rows, np.float32)], axis=1)
    return parl.Transition(
        inputs={"obs": obs},
        next_inputs={"obs": obs + 1},
        states={},
        next_states={},
        actions={"action": np.zeros((rows, 1), np.int64)},
        rewards={"reward": np.full((rows, 1), 3.0, np.float32)},
        next_episode_end=np.zeros((rows, 1), np.float32),
    )


def test_a_generator_learn_takes_one_optimizer_step_per_item() -> None:
    task = parl.ComputationTask("T", SteppingAlgorithm(steps=4))
    costs = task.learn(toy_batch())
    algorithm = task.algorithm
    assert task.update_steps == 4
    assert algorithm.after_updates == [1, 2, 3, 4]
    assert len(algorithm.snapshots) == 4
    # Snapshots before each step and after the last: every step changed the weights.
    snapshots = algorithm.snapshots + [algorithm.model.get_weights()]
    for before, after in zip(snapshots, snapshots[1:]):
        assert not np.array_equal(before["fc.w"], after["fc.w"])
    assert costs["index"] == pytest.approx(np.mean([0, 1, 2, 3]))
    task.learn(toy_batch())
    assert task.update_steps == 8
    assert algorithm.after_updates == list(range(1, 9))


def test_each_item_is_computed_after_the_previous_step() -> None:
    task = parl.ComputationTask("T", SteppingAlgorithm(steps=3))
    task.learn(toy_batch())
    task.algorithm.snapshots.clear()
    before = task.algorithm.model.get_weights()
    task.learn(toy_batch())
    snaps = task.algorithm.snapshots
    np.testing.assert_array_equal(snaps[0]["fc.w"], before["fc.w"])
    assert not np.array_equal(snaps[1]["fc.w"], snaps[0]["fc.w"])
    assert not np.array_equal(snaps[2]["fc.w"], snaps[1]["fc.w"])


def test_generator_costs_are_the_means_over_the_steps() -> None:
    losses = []

    def record(error):
        value = (error * error).mean()
        losses.append(float(value))
        return value.detach()

    task = parl.ComputationTask("T", SteppingAlgorithm(steps=3, extra={"mse": record}))
    costs = task.learn(toy_batch())
    assert len(losses) == 3
    assert costs["mse"] == pytest.approx(np.mean(losses), rel=1e-6)
    assert costs["loss"] == pytest.approx(np.mean(losses), rel=1e-6)
    assert isinstance(costs["loss"], float)
    assert losses[2] < losses[0]  # the steps did descend


def test_a_generator_that_yields_nothing_raises() -> None:
    task = parl.ComputationTask("T", SteppingAlgorithm(steps=0))
    with pytest.raises(ValueError, match="no optimizer steps"):
        task.learn(toy_batch())
    assert task.update_steps == 0


def test_an_item_without_a_loss_raises() -> None:
    class NoLoss(SteppingAlgorithm):
        def learn(self, *args):
            yield {"mse": paddle.full([], 1.0)}

    with pytest.raises(ValueError, match="'loss'"):
        parl.ComputationTask("T", NoLoss()).learn(toy_batch())


@pytest.mark.parametrize("steps", [1, 3])
def test_a_non_scalar_cost_other_than_td_error_raises_naming_it(steps) -> None:
    task = parl.ComputationTask("T", SteppingAlgorithm(steps=steps, extra={"per_row": lambda e: e.detach()}))
    with pytest.raises(ValueError) as info:
        task.learn(toy_batch())
    assert "'per_row'" in str(info.value) and "td_error" in str(info.value)


def test_a_non_scalar_cost_from_a_plain_learn_raises() -> None:
    class PerRow(RecordingAlgorithm):
        def learn(self, *args):
            costs = super().learn(*args)
            return {**costs, "abs_error": paddle.ones([3, 1])}

    rng = np.random.default_rng(11)
    with pytest.raises(ValueError, match="'abs_error'"):
        parl.ComputationTask("T", PerRow()).learn(learn_batch(obs_batch(rng, 3), obs_batch(rng, 3)))


def test_a_refused_cost_takes_no_optimizer_step() -> None:
    """The costs are checked before they change the model: a learn that raises has not updated it."""
    task = parl.ComputationTask("T", SteppingAlgorithm(steps=1))
    task.learn(toy_batch())
    task.algorithm.extra = {"per_row": lambda e: e.detach()}
    before = task.algorithm.model.get_weights()
    with pytest.raises(ValueError, match="per_row"):
        task.learn(toy_batch())
    assert task.update_steps == 1, "the refused batch was counted as an update"
    np.testing.assert_array_equal(task.algorithm.model.get_weights()["fc.w"], before["fc.w"])


# -- checked hyperparameter names -------------------------------------------------------------


def q_model() -> MLPQModel:
    return MLPQModel(obs_dim=2, num_actions=2, hidden_sizes=())


def test_an_unknown_dqn_option_raises_naming_it() -> None:
    with pytest.raises(ValueError) as info:
        DQN(q_model, gama=0.9)
    message = str(info.value)
    assert "DQN" in message and "gama=0.9" in message and "'gamma'" in message


class Acting(parl.Algorithm):
    """The least an algorithm implements (these tests only build it): a predict."""

    def predict(self, inputs, states, *, deterministic=False):
        return {}, {}


class Tempered(Acting):
    def __init__(self, model_func, *, temperature: float = 1.0, learning_rate: float = 1e-3) -> None:
        super().__init__(model_func, learning_rate=learning_rate)
        self.temperature = temperature


class TemperedChild(Tempered):
    pass


class Loose(Acting):
    def __init__(self, model_func, **kwargs) -> None:
        super().__init__(model_func)
        self.options = kwargs


def test_an_unknown_option_of_a_subclass_raises_naming_it() -> None:
    assert Tempered(EchoModel, temperature=0.5).temperature == 0.5
    with pytest.raises(ValueError) as info:
        Tempered(EchoModel, temprature=0.5)
    assert "Tempered" in str(info.value) and "temprature" in str(info.value) and "'temperature'" in str(info.value)
    with pytest.raises(ValueError, match="TemperedChild: unknown option grad_clip"):
        TemperedChild(EchoModel, grad_clip=1.0)  # Tempered does not take grad_clip


def test_a_subclass_taking_any_keyword_is_not_checked() -> None:
    assert Loose(EchoModel, anything=1, more="x").options == {"anything": 1, "more": "x"}


def test_create_algorithm_func_reports_an_unknown_option_when_called() -> None:
    func = parl.create_algorithm_func(MLPQModel, dict(obs_dim=2, num_actions=2), DQN, dict(gamma=0.9, tua=0.5))
    with pytest.raises(ValueError, match="tua"):
        func()


# -- target networks --------------------------------------------------------------------------


def built_q_model(seed: int) -> MLPQModel:
    paddle.seed(seed)
    model = q_model()
    model.value({"obs": paddle.ones([1, 2])})
    return model


def weights_equal(a: parl.Model, b: parl.Model) -> bool:
    wa, wb = a.get_weights(), b.get_weights()
    return set(wa) == set(wb) and all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_initialize_copies_only_targets_that_are_not_built() -> None:
    online_a, online_b = built_q_model(1), built_q_model(2)
    fresh_target = q_model()
    restored_target = built_q_model(3)
    restored = restored_target.get_weights()
    sync = TargetSync([(online_a, fresh_target), (online_b, restored_target)], tau=1.0, interval=1)
    sync.initialize()
    assert weights_equal(fresh_target, online_a)
    assert fresh_target.q.params["w"] is not online_a.q.params["w"]
    for key, value in restored_target.get_weights().items():
        np.testing.assert_array_equal(value, restored[key])
    # Only once: a later initialize does not copy again.
    online_a.q.set_arrays({"w": np.zeros((2, 2), np.float32), "b": np.zeros(2, np.float32)})
    sync.initialize()
    assert not weights_equal(fresh_target, online_a)


@pytest.mark.parametrize("tau, interval", [(1.0, 3), (0.25, 2), (0.5, 1)])
def test_after_update_syncs_every_interval_updates_by_tau(tau, interval) -> None:
    online, target = built_q_model(4), built_q_model(5)
    sync = TargetSync([(online, target)], tau=tau, interval=interval)
    expected = target.get_weights()
    for step in range(1, 3 * interval + 1):
        online.q.set_arrays({k: v + 1.0 for k, v in online.q.get_arrays().items()})  # the online model moves
        sync.after_update(step)
        if step % interval == 0:
            current = online.get_weights()
            expected = {k: (1.0 - tau) * expected[k] + tau * current[k] for k in expected}
        for key, value in target.get_weights().items():
            np.testing.assert_allclose(value, expected[key], rtol=1e-5, atol=1e-6, err_msg=f"step {step} {key}")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(tau=0.0, interval=1), ["tau", "0.0"]),
        (dict(tau=1.5, interval=1), ["tau", "1.5"]),
        (dict(tau=1.0, interval=0), ["target_update_interval", "0"]),
        (dict(tau=1.0, interval=2.5), ["target_update_interval", "2.5"]),
    ],
)
def test_bad_tau_or_interval_raise(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        TargetSync([(q_model(), q_model())], **kwargs)
    for word in words:
        assert word in str(info.value)
