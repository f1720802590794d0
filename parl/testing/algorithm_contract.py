"""The contract every algorithm keeps, as a pytest test class to subclass from any repository.

    from parl.models import MLPQModel
    from parl.testing import AlgorithmCase, AlgorithmContract
    from my_algorithms import ExpectedSarsa

    class TestExpectedSarsa(AlgorithmContract):
        cases = [AlgorithmCase("ExpectedSarsa", ExpectedSarsa, MLPQModel, {"obs_dim": 4, "num_actions": 2})]

pytest then runs every check below once per case (the class's ``pytest_generate_tests``
parametrizes them; this module imports no pytest):

- predict gives actions (and next states) shaped and typed by the model's specs, sampled or deterministic;
- deterministic predictions repeat;
- learn, through a ComputationTask, returns finite named costs including "loss", and changes the weights;
- a save/load round trip reproduces predictions exactly (deterministic ones, and sampled ones under one seed),
  a restored algorithm continues exactly as the original, and load then save writes the same files;
- two runs with one agent and one seed give identical episode returns;
- bad hyperparameters raise ValueError naming the parameter and the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import paddle

import parl

#: Options and values every algorithm refuses with a ValueError naming both (``AlgorithmCase.bad_options``).
BAD_OPTIONS: Tuple[Tuple[str, object], ...] = (
    ("learning_rate", -1e-3),
    ("learning_rate", 0.0),
    ("gamma", 1.5),
    ("gamma", -0.1),
    ("no_such_option", 3),
)


@dataclass
class AlgorithmCase:
    """One algorithm under contract: how to build it small, and where it acts.

    Attributes:
        name: the test id.
        algorithm_class: the :class:`parl.Algorithm` subclass.
        model_class: the :class:`parl.Model` it is built over.
        model_args: the model's keyword arguments (small sizes keep the checks fast).
        algorithm_args: the algorithm's keyword arguments.
        env_id: the gymnasium environment a :class:`~parl.utils.GymAgent` plays with it.
        on_policy: learn from :class:`parl.OnPolicyHelper` segments (else from :class:`parl.ExpReplayHelper`).
        helper_args: the helper's keyword arguments, over the contract's small defaults.
        bad_options: (option, value) pairs the algorithm must refuse with a ValueError naming both.
    """

    name: str
    algorithm_class: type
    model_class: type
    model_args: Dict[str, Any]
    algorithm_args: Dict[str, Any] = field(default_factory=dict)
    env_id: str = "CartPole-v1"
    on_policy: bool = False
    helper_args: Dict[str, Any] = field(default_factory=dict)
    bad_options: Sequence[Tuple[str, object]] = BAD_OPTIONS

    def algorithm_func(self, overrides: Optional[Dict[str, Any]] = None) -> Callable[[], parl.Algorithm]:
        """A zero-argument callable building the algorithm, with ``overrides`` over its arguments."""
        return parl.create_algorithm_func(
            self.model_class, self.model_args, self.algorithm_class, {**self.algorithm_args, **(overrides or {})}
        )

    def helper(self, seed: int) -> parl.AgentHelper:
        """A small helper for one agent: 8-step segments on-policy, else a 1000-row replay of 16-row batches."""
        if self.on_policy:
            return parl.OnPolicyHelper(**{"sample_interval": 8, **self.helper_args})
        return parl.ExpReplayHelper(
            **{"capacity": 1000, "batch_size": 16, "warmup_steps": 32, "seed": seed, **self.helper_args}
        )


def make_task(case: AlgorithmCase, seed: int = 0, normalize_inputs: bool = False) -> parl.ComputationTask:
    """The case's algorithm in a ComputationTask "RL", built after seeding everything with ``seed``."""
    parl.seed_everything(seed)
    return parl.ComputationTask("RL", case.algorithm_func()(), normalize_inputs=normalize_inputs)


def random_inputs(task: parl.ComputationTask, batch: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """Normal draws shaped and typed by the task's input specs, ``batch`` rows."""
    return {s.name: rng.standard_normal((batch,) + s.shape).astype(s.dtype) for s in task.input_specs}


def training_batch(task: parl.ComputationTask, case: AlgorithmCase, rng: np.random.Generator) -> parl.Transition:
    """A training batch built by the task's own predictions: two segments (on-policy) or 12 independent rows."""
    lengths = [7, 5] if case.on_policy else [1] * 12
    n = sum(lengths)
    inputs, next_inputs = random_inputs(task, n, rng), random_inputs(task, n, rng)
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


def episode_returns(case: AlgorithmCase, seed: int, episodes: int) -> List[float]:
    """Returns of ``episodes`` episodes of one seeded GymAgent learning with the case's algorithm."""
    import gymnasium as gym

    from parl.utils import GymAgent

    parl.seed_everything(seed)
    manager = parl.Manager({"RL": parl.TaskSettings(case.algorithm_func())})
    agent = GymAgent(gym.make(case.env_id), seed=seed, num_games=episodes)
    manager.add_agent(agent, {"RL": case.helper(seed)})
    manager.start()
    manager.join(timeout=120)
    manager.stop()
    assert manager.errors == [], manager.errors
    returns = [e["reward"] for e in manager.episodes()]
    assert len(returns) == episodes
    assert manager.tasks["RL"].update_steps > 0, "the run never learned"
    return returns


class AlgorithmContract:
    """The algorithm contract as a pytest test class: subclass it as ``Test...`` with ``cases``.

    Each test method takes ``case`` (and some a second parameter), parametrized by
    :meth:`pytest_generate_tests` over :attr:`cases`; ``tmp_path`` is pytest's.
    """

    #: The algorithms under contract.
    cases: Sequence[AlgorithmCase] = ()

    def pytest_generate_tests(self, metafunc: Any) -> None:
        """pytest's hook for this class: every test runs once per case (and per value of its other parameter)."""
        names = metafunc.fixturenames
        if "bad_option" in names:  # each case with its own bad options
            pairs = [(case, (option, value)) for case in self.cases for option, value in case.bad_options]
            metafunc.parametrize("case, bad_option", pairs, ids=[f"{c.name}-{o}={v!r}" for c, (o, v) in pairs])
        elif "case" in names:
            metafunc.parametrize("case", list(self.cases), ids=[case.name for case in self.cases])
        if "deterministic" in names:
            metafunc.parametrize("deterministic", [False, True])
        if "into" in names:
            metafunc.parametrize("into", ["fresh", "trained"])

    def test_predict_shapes_follow_the_specs(self, case: AlgorithmCase, deterministic: bool) -> None:
        task = make_task(case)
        rng = np.random.default_rng(0)
        inputs = random_inputs(task, 5, rng)
        actions, next_states = task.predict(inputs, task.initial_states(5), deterministic=deterministic)
        assert sorted(actions) == sorted(s.name for s in task.action_specs)
        for spec in task.action_specs:
            assert actions[spec.name].shape == (5,) + spec.shape
            assert actions[spec.name].dtype == spec.dtype
        assert sorted(next_states) == sorted(s.name for s in task.state_specs)
        for spec in task.state_specs:
            assert next_states[spec.name].shape == (5,) + spec.shape
            assert next_states[spec.name].dtype == spec.dtype

    def test_deterministic_predictions_repeat(self, case: AlgorithmCase) -> None:
        task = make_task(case)
        inputs = random_inputs(task, 6, np.random.default_rng(1))
        first, _ = task.predict(inputs, task.initial_states(6), deterministic=True)
        second, _ = task.predict(inputs, task.initial_states(6), deterministic=True)
        for name in first:
            np.testing.assert_array_equal(first[name], second[name])

    def test_learn_returns_finite_named_costs(self, case: AlgorithmCase) -> None:
        task = make_task(case)
        rng = np.random.default_rng(2)
        batches = [training_batch(task, case, rng) for _ in range(3)]  # predicting builds every layer
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

    def test_save_load_reproduces_predictions_exactly(self, case: AlgorithmCase, tmp_path: Any) -> None:
        task = make_task(case)
        rng = np.random.default_rng(3)
        for _ in range(2):
            task.learn(training_batch(task, case, rng))
        path = str(tmp_path / "task.pdckpt")
        task.save(path)
        restored = make_task(case, seed=99)  # other initial weights
        restored.load(path)
        inputs = random_inputs(task, 8, rng)
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

    def test_one_agent_one_seed_runs_are_identical(self, case: AlgorithmCase) -> None:
        first = episode_returns(case, seed=5, episodes=4)
        second = episode_returns(case, seed=5, episodes=4)
        assert first == second

    def test_bad_hyperparameters_raise_value_error_naming_them(
        self, case: AlgorithmCase, bad_option: Tuple[str, object]
    ) -> None:
        option, value = bad_option
        try:
            case.algorithm_func({option: value})()
        except ValueError as exc:
            message = str(exc)
        else:
            raise AssertionError(f"{case.name}: {option}={value!r} raised no ValueError")
        assert option in message and repr(value) in message, message

    def test_a_restored_algorithm_continues_exactly_as_the_original(self, case: AlgorithmCase, tmp_path: Any) -> None:
        task = make_task(case)
        rng = np.random.default_rng(4)
        for _ in range(3):  # an odd count: TD3's next update then depends on its policy-delay counter
            task.learn(training_batch(task, case, rng))
        path = str(tmp_path / "task.json")
        task.save(path)
        restored = make_task(case, seed=99)
        restored.load(path)
        assert restored.algorithm.state() == task.algorithm.state()
        assert restored.update_steps == task.update_steps
        for step in range(3):
            batch = training_batch(task, case, rng)
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

    def test_load_then_save_writes_the_same_arrays_and_metadata(
        self, case: AlgorithmCase, into: str, tmp_path: Any
    ) -> None:
        """Weights, optimizer state (pending in a fresh task, applied in a trained one), input statistics,
        update count and algorithm state all survive a resume-save-resume bit for bit."""
        import safetensors.numpy

        task = make_task(case, normalize_inputs=True)
        rng = np.random.default_rng(5)
        for _ in range(3):
            task.learn(training_batch(task, case, rng))  # sampled predictions: the input statistics move too
        first = tmp_path / "a" / "RL.json"
        task.save(str(first))
        resumed = make_task(case, seed=99, normalize_inputs=True)
        if into == "trained":
            resumed.learn(training_batch(resumed, case, np.random.default_rng(6)))  # its optimizer exists
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
