"""The core vocabulary is abstract where a subclass must supply a method: one that leaves it out
fails at construction, naming it, instead of at its first call in the middle of a run."""

from __future__ import annotations

from typing import Dict

import pytest

import parl
from parl.core.communicator import Communicator

from toys import EchoAlgorithm, EchoModel, IdleAgent


def test_an_agent_without_run_one_episode_fails_at_construction() -> None:
    class Silent(parl.Agent):
        pass

    with pytest.raises(TypeError, match="Silent.*run_one_episode"):
        Silent(env=None)
    with pytest.raises(TypeError, match="run_one_episode"):
        parl.Agent(env=None)
    assert IdleAgent(env=None).counters() == {"episode": 0}


def test_a_helper_without_learn_fails_at_construction() -> None:
    class NoLearn(parl.AgentHelper):
        def _store(self, transition, episode_over) -> None:
            pass

    with pytest.raises(TypeError, match="NoLearn.*learn"):
        NoLearn()
    with pytest.raises(TypeError, match="learn"):
        parl.AgentHelper()


def test_a_helper_that_stores_nothing_needs_no_store() -> None:
    class Learner(parl.AgentHelper):
        def learn(self) -> None:
            return None

    helper = Learner()
    assert helper.learn() is None and helper.counters() == {}


def test_an_algorithm_without_predict_fails_at_construction() -> None:
    class Unacting(parl.Algorithm):
        def learn(self, batch):
            return {}

    with pytest.raises(TypeError, match="Unacting.*predict"):
        Unacting(EchoModel)
    with pytest.raises(TypeError, match="predict"):
        parl.Algorithm(EchoModel)


def test_an_algorithm_that_only_acts_is_built_and_says_it_does_not_learn() -> None:
    class ActOnly(parl.Algorithm):
        def predict(self, inputs, states, *, deterministic=False):
            return {}, {}

    algorithm = ActOnly(EchoModel)
    with pytest.raises(NotImplementedError, match="ActOnly only acts"):
        algorithm.learn(None)


def test_an_unknown_option_is_named_before_a_missing_method() -> None:
    class Unacting(parl.Algorithm):
        pass

    with pytest.raises(ValueError, match="unknown option gamma=0.5"):
        Unacting(EchoModel, gamma=0.5)


def test_a_model_without_specs_is_a_part_and_a_task_on_it_fails_at_construction() -> None:
    class Part(parl.Model):
        pass

    part = Part()  # a model held inside another declares no specs
    assert part.named_layers() == [] and part.get_state_specs() == []
    with pytest.raises(NotImplementedError, match="Part must implement get_input_specs"):
        parl.ComputationTask("RL", EchoAlgorithm(Part))


def test_a_communicator_without_predict_or_learn_fails_at_construction() -> None:
    class Half(Communicator):
        def predict(self, inputs, states=None):
            return {}, {}

    with pytest.raises(TypeError, match="Half.*learn"):
        Half()


def test_each_core_class_names_exactly_its_required_methods() -> None:
    required: Dict[type, frozenset] = {
        parl.Agent: frozenset({"run_one_episode"}),
        parl.AgentHelper: frozenset({"learn"}),
        parl.Algorithm: frozenset({"predict"}),
        Communicator: frozenset({"predict", "learn"}),
    }
    for cls, names in required.items():
        assert cls.__abstractmethods__ == names, cls.__name__
    assert not getattr(parl.Model, "__abstractmethods__", None)
