"""Evaluation agents: the robot's agent class acting greedily through EvalHelpers that never learn."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import parl
from parl.algorithms import A2C
from parl.experiment.evaluation.agents import EvalHelper, copy_weights, evaluate_agents
from parl.experiment.evaluation.greedy import evaluate
from parl.models import MLPActorCritic
from parl.utils import EpsilonGreedyAgent, GymAgent, LinearSchedule


def make_task(name: str, seed: int) -> parl.ComputationTask:
    parl.seed_everything(seed)
    func = parl.create_algorithm_func(
        MLPActorCritic, dict(obs_dim=4, num_actions=2, hidden_sizes=(16,)), A2C, dict(gamma=0.99, learning_rate=1e-3)
    )
    return parl.TaskSettings(func).make_task(name)


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def test_evaluation_agents_return_what_the_deterministic_policy_returns() -> None:
    task = make_task("RL", 0)
    returns = evaluate_agents(lambda seed: GymAgent(cartpole(), seed=seed), {"RL": task}, episodes=4, seed=30)
    assert returns == evaluate(task, cartpole, 4, seed=30)


def test_exploring_agents_act_greedily_when_not_training() -> None:
    task = make_task("RL", 1)

    def always_random(seed: int) -> GymAgent:
        return EpsilonGreedyAgent(cartpole(), epsilon=LinearSchedule(1.0, 1.0, 1), seed=seed)

    returns = evaluate_agents(always_random, {"RL": task}, episodes=4, seed=50)
    assert returns == evaluate(task, cartpole, 4, seed=50)


def test_eval_helpers_store_and_learn_nothing() -> None:
    task = make_task("RL", 2)
    helper = EvalHelper(task)
    obs = {"obs": np.zeros(4, np.float32)}
    actions, states = helper.predict(obs)
    assert actions["action"].shape == (1,) and states == {}
    helper.store_data(obs, actions, 1.0, obs, False, False)
    assert helper.learn() is None
    assert task.update_steps == 0


def test_eval_helpers_check_what_they_predict_on_and_their_transport_never_learns() -> None:
    helper = EvalHelper(make_task("RL", 2))
    with pytest.raises(ValueError, match="input 'obs': expected shape"):
        helper.predict({"obs": np.zeros(3, np.float32)})
    # What is stored is dropped unchecked: no step of an evaluation is learned from.
    obs = {"obs": np.zeros(4, np.float32)}
    helper.store_data(obs, {"action": np.array([1])}, 1.0, {"obs": np.zeros(5, np.float32)}, False, False)
    with pytest.raises(RuntimeError, match="does not learn"):
        helper.communicator.learn(None)


def test_a_first_episode_below_the_bar_is_the_only_one_played() -> None:
    task = make_task("RL", 3)
    first = evaluate(task, cartpole, 1, seed=70)[0]
    assert evaluate_agents(
        lambda s: GymAgent(cartpole(), seed=s), {"RL": task}, episodes=5, seed=70, stop_below=first + 1
    ) == [first]
    assert (
        len(
            evaluate_agents(lambda s: GymAgent(cartpole(), seed=s), {"RL": task}, episodes=5, seed=70, stop_below=first)
        )
        == 5
    )


def test_copy_weights_copies_by_task_name() -> None:
    learner, evaluator = make_task("RL", 4), make_task("RL", 5)
    obs = {"obs": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)}
    for task in (learner, evaluator):
        task.predict(obs, {}, deterministic=True)
    copy_weights({"RL": learner}, {"RL": evaluator})
    weights = learner.algorithm_weights()["model"]
    for key, value in evaluator.algorithm_weights()["model"].items():
        np.testing.assert_array_equal(value, weights[key])


def test_episodes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="episodes"):
        evaluate_agents(lambda s: GymAgent(cartpole(), seed=s), {"RL": make_task("RL", 0)}, episodes=0, seed=0)
