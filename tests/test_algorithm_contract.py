"""The contract every algorithm of parl.algorithms keeps, checked over all of them.

- predict gives actions (and next states) shaped and typed by the model's specs, sampled or deterministic;
- learn, through a ComputationTask, returns finite named costs including "loss";
- a save/load round trip reproduces predictions exactly (deterministic ones, and sampled ones under one seed),
  a restored algorithm continues exactly as the original, and load then save writes the same files;
- two runs with one agent and one seed give identical episode returns;
- bad hyperparameters raise ValueError naming the parameter and the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

import gymnasium as gym
import numpy as np
import paddle
import pytest

import parl
from parl.utils import GymAgent


@dataclass
class Case:
    """One algorithm under contract: how to build it small, and where it acts."""

    name: str
    algorithm_class: type
    model_class: type
    model_args: Dict[str, Any]
    algorithm_args: Dict[str, Any]
    env_id: str
    on_policy: bool
    helper_args: Dict[str, Any] = field(default_factory=dict)

    def algorithm_func(self, **overrides: Any) -> Callable[[], parl.Algorithm]:
        return parl.create_algorithm_func(
            self.model_class, self.model_args, self.algorithm_class, {**self.algorithm_args, **overrides}
        )

    def helper(self, seed: int) -> parl.AgentHelper:
        if self.on_policy:
            return parl.OnPolicyHelper(**{"sample_interval": 8, **self.helper_args})
        return parl.ExpReplayHelper(
            **{"capacity": 1000, "batch_size": 16, "warmup_steps": 32, "seed": seed, **self.helper_args}
        )


def _cases() -> List[Case]:
    from parl.algorithms.a2c import A2C
    from parl.algorithms.ddpg import DDPG
    from parl.algorithms.dqn import DQN
    from parl.algorithms.policy_gradient import PolicyGradient
    from parl.algorithms.ppo import PPO
    from parl.algorithms.sac import SAC
    from parl.algorithms.td3 import TD3
    from parl.models import LSTMActorCritic, MLPActorCritic, MLPQModel
    from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic

    q = dict(obs_dim=4, num_actions=2, hidden_sizes=(16,))
    discrete = dict(obs_dim=4, num_actions=2, hidden_sizes=(16,))
    gaussian = dict(obs_dim=3, action_dim=1, hidden_sizes=(16,))
    lstm = dict(obs_dim=4, num_actions=2, hidden_size=8)
    continuous = dict(obs_dim=3, action_dim=1, hidden_sizes=(16,))
    ppo = dict(epochs=2, num_minibatches=2)
    return [
        Case("DQN", DQN, MLPQModel, q, {}, "CartPole-v1", False),
        Case("DQN-dueling", DQN, MLPQModel, {**q, "dueling": True}, {}, "CartPole-v1", False),
        Case(
            "DQN-prioritized-3-step",
            DQN,
            MLPQModel,
            q,
            {},
            "CartPole-v1",
            False,
            dict(prioritized=True, n_step=3, gamma=0.99),
        ),
        Case("PolicyGradient", PolicyGradient, MLPActorCritic, discrete, {}, "CartPole-v1", True),
        Case("PolicyGradient-gaussian", PolicyGradient, MLPActorCritic, gaussian, {}, "Pendulum-v1", True),
        Case("A2C", A2C, MLPActorCritic, discrete, {}, "CartPole-v1", True),
        Case("A2C-gaussian", A2C, MLPActorCritic, gaussian, {}, "Pendulum-v1", True),
        Case("A2C-lstm", A2C, LSTMActorCritic, lstm, {}, "CartPole-v1", True),
        Case("PPO", PPO, MLPActorCritic, discrete, ppo, "CartPole-v1", True),
        Case("PPO-gaussian", PPO, MLPActorCritic, gaussian, ppo, "Pendulum-v1", True),
        Case("PPO-lstm", PPO, LSTMActorCritic, lstm, ppo, "CartPole-v1", True),
        Case("DDPG", DDPG, DeterministicActorCritic, {**continuous, "num_critics": 1}, {}, "Pendulum-v1", False),
        Case("TD3", TD3, DeterministicActorCritic, continuous, {}, "Pendulum-v1", False),
        Case("SAC", SAC, GaussianActorCritic, continuous, {}, "Pendulum-v1", False),
        Case("SAC-3-step", SAC, GaussianActorCritic, continuous, {}, "Pendulum-v1", False, dict(n_step=3, gamma=0.99)),
    ]


CASES = _cases()
IDS = [c.name for c in CASES]


def _make_task(case: Case, seed: int = 0, **task_args: Any) -> parl.ComputationTask:
    parl.seed_everything(seed)
    return parl.ComputationTask("RL", case.algorithm_func()(), **task_args)


def _inputs(task: parl.ComputationTask, batch: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    return {s.name: rng.standard_normal((batch,) + s.shape).astype(s.dtype) for s in task.input_specs}


def _batch(task: parl.ComputationTask, case: Case, rng: np.random.Generator) -> parl.Transition:
    """A training batch built by the task's own predictions: two segments (on-policy) or 12 independent rows."""
    lengths = [7, 5] if case.on_policy else [1] * 12
    n = sum(lengths)
    inputs, next_inputs = _inputs(task, n, rng), _inputs(task, n, rng)
    states = {s.name: (0.1 * rng.standard_normal((n,) + s.shape)).astype(s.dtype) for s in task.state_specs}
    actions, next_states = task.predict(inputs, states)
    ends = np.zeros((n, 1), np.float32)
    ends[lengths[0] - 1] = 1.0  # the first segment ends in a termination, the second is cut
    batch = parl.Transition(
        inputs=inputs,
        next_inputs=next_inputs,
        states=states,
        next_states=next_states,
        actions=actions,
        rewards={s.name: rng.standard_normal((n,) + s.shape).astype(s.dtype) for s in task.reward_specs},
        next_episode_end=ends,
    )
    if case.on_policy:
        batch = batch._replace(sequence_lengths=tuple(lengths))
    return batch


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("deterministic", [False, True])
def test_predict_shapes_follow_the_specs(case: Case, deterministic: bool) -> None:
    task = _make_task(case)
    rng = np.random.default_rng(0)
    inputs = _inputs(task, 5, rng)
    actions, next_states = task.predict(inputs, task.initial_states(5), deterministic=deterministic)
    assert sorted(actions) == sorted(s.name for s in task.action_specs)
    for spec in task.action_specs:
        assert actions[spec.name].shape == (5,) + spec.shape
        assert actions[spec.name].dtype == spec.dtype
    assert sorted(next_states) == sorted(s.name for s in task.state_specs)
    for spec in task.state_specs:
        assert next_states[spec.name].shape == (5,) + spec.shape
        assert next_states[spec.name].dtype == spec.dtype


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_deterministic_predictions_repeat(case: Case) -> None:
    task = _make_task(case)
    inputs = _inputs(task, 6, np.random.default_rng(1))
    first, _ = task.predict(inputs, task.initial_states(6), deterministic=True)
    second, _ = task.predict(inputs, task.initial_states(6), deterministic=True)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_learn_returns_finite_named_costs(case: Case) -> None:
    task = _make_task(case)
    rng = np.random.default_rng(2)
    batches = [_batch(task, case, rng) for _ in range(3)]  # predicting builds every layer
    before = task.algorithm_weights()
    assert before["model"], "the model has no weights after predicting"
    for batch in batches:
        costs = task.learn(batch)
        assert "loss" in costs
        for name, value in costs.items():
            assert isinstance(name, str) and name
            assert np.all(np.isfinite(value)), (name, value)
            if name != "td_error":
                assert isinstance(value, float), (name, type(value))
    assert task.update_steps >= 3
    after = task.algorithm_weights()
    changed = [key for key in before["model"] if not np.array_equal(before["model"][key], after["model"][key])]
    assert changed, "learning changed no weight of the model"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_save_load_reproduces_predictions_exactly(case: Case, tmp_path) -> None:
    task = _make_task(case)
    rng = np.random.default_rng(3)
    for _ in range(2):
        task.learn(_batch(task, case, rng))
    path = str(tmp_path / "task.pdckpt")
    task.save(path)
    restored = _make_task(case, seed=99)  # other initial weights
    restored.load(path)
    inputs = _inputs(task, 8, rng)
    states = task.initial_states(8)
    for deterministic in (True, False):
        paddle.seed(7)
        expected = task.predict(inputs, states, deterministic=deterministic)
        paddle.seed(7)
        got = restored.predict(inputs, states, deterministic=deterministic)
        for part_expected, part_got in zip(expected, got):
            assert sorted(part_expected) == sorted(part_got)
            for name in part_expected:
                np.testing.assert_array_equal(part_got[name], part_expected[name], err_msg=name)


def _episode_returns(case: Case, seed: int, episodes: int) -> List[float]:
    parl.seed_everything(seed)
    manager = parl.Manager({"RL": parl.TaskSettings(case.algorithm_func())})
    agent = GymAgent(gym.make(case.env_id), seed=seed, num_games=episodes)
    manager.add_agent(agent, {"RL": case.helper(seed)})
    manager.start()
    manager.join(timeout=120)
    manager.stop()
    assert manager.errors == []
    returns = [e["reward"] for e in manager.episodes()]
    assert len(returns) == episodes
    assert manager.tasks["RL"].update_steps > 0, "the run never learned"
    return returns


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_agent_one_seed_runs_are_identical(case: Case) -> None:
    first = _episode_returns(case, seed=5, episodes=4)
    second = _episode_returns(case, seed=5, episodes=4)
    assert first == second


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize(
    "option, value",
    [("learning_rate", -1e-3), ("learning_rate", 0.0), ("gamma", 1.5), ("gamma", -0.1), ("no_such_option", 3)],
)
def test_bad_hyperparameters_raise_value_error_naming_them(case: Case, option: str, value: float) -> None:
    with pytest.raises(ValueError) as info:
        case.algorithm_func(**{option: value})()
    message = str(info.value)
    assert option in message and repr(value) in message, message


def test_every_exported_algorithm_is_under_contract() -> None:
    import parl.algorithms

    exported = {getattr(parl.algorithms, name) for name in parl.algorithms.__all__}
    exported = {cls for cls in exported if isinstance(cls, type) and issubclass(cls, parl.Algorithm)}
    covered = {case.algorithm_class for case in CASES}
    assert exported <= covered, sorted(cls.__name__ for cls in exported - covered)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_restored_algorithm_continues_exactly_as_the_original(case: Case, tmp_path) -> None:
    task = _make_task(case)
    rng = np.random.default_rng(4)
    for _ in range(3):  # an odd count: TD3's next update then depends on its policy-delay counter
        task.learn(_batch(task, case, rng))
    path = str(tmp_path / "task.json")
    task.save(path)
    restored = _make_task(case, seed=99)
    restored.load(path)
    assert restored.algorithm.state() == task.algorithm.state()
    assert restored.update_steps == task.update_steps
    for step in range(3):
        batch = _batch(task, case, rng)
        paddle.seed(100 + step)
        expected = task.learn(batch)
        paddle.seed(100 + step)
        got = restored.learn(batch)
        assert sorted(got) == sorted(expected)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=f"update {step}: {name}")
    expected_weights, got_weights = task.algorithm_weights(), restored.algorithm_weights()
    for model in expected_weights:
        for key, value in expected_weights[model].items():
            if isinstance(value, dict):
                continue  # normalizer statistics: compared through the costs above
            np.testing.assert_array_equal(got_weights[model][key], value, err_msg=f"{model}/{key}")
    assert restored.algorithm.state() == task.algorithm.state()


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("into", ["fresh", "trained"])
def test_load_then_save_writes_the_same_arrays_and_metadata(case: Case, into: str, tmp_path) -> None:
    """Weights, optimizer state (pending in a fresh task, applied in a trained one), input statistics,
    update count and algorithm state all survive a resume-save-resume bit for bit."""
    import safetensors.numpy

    task = _make_task(case, normalize_inputs=True)
    rng = np.random.default_rng(5)
    for _ in range(3):
        task.learn(_batch(task, case, rng))  # sampled predictions: the input statistics move too
    first = tmp_path / "a" / "RL.json"
    task.save(str(first))
    resumed = _make_task(case, seed=99, normalize_inputs=True)
    if into == "trained":
        resumed.learn(_batch(resumed, case, np.random.default_rng(6)))  # its optimizer exists
    resumed.load(str(first))
    second = tmp_path / "b" / "RL.json"
    resumed.save(str(second))
    arrays_a = safetensors.numpy.load_file(str(first.with_suffix(".safetensors")))
    arrays_b = safetensors.numpy.load_file(str(second.with_suffix(".safetensors")))
    assert sorted(arrays_b) == sorted(arrays_a)
    sections = {key.split("/", 1)[0] for key in arrays_a}
    assert {"weights", "optimizer", "normalizer"} <= sections, sections
    for key, value in arrays_a.items():
        assert arrays_b[key].dtype == value.dtype and arrays_b[key].shape == value.shape, key
        assert arrays_b[key].tobytes() == value.tobytes(), key
    assert json.loads(second.read_text()) == json.loads(first.read_text())  # counters, algorithm state, checksums
