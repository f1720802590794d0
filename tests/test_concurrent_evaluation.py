"""Evaluation episodes played at once: the returns of one-by-one play, predictions batched per task,
nothing stored, errors and environments handled as one-by-one play handles them."""

from __future__ import annotations

from typing import Dict, List

import gymnasium as gym
import numpy as np
import pytest

import parl
from parl.algorithms import A2C, DQN
from parl.experiment.evaluation.agents import evaluate_agents
from parl.experiment.evaluation.greedy import evaluate
from parl.models import MLPActorCritic, MLPQModel
from parl.runtime import episodes as concurrent
from parl.utils import GymAgent


def actor_critic(name: str, seed: int, hidden=(64, 64)) -> parl.ComputationTask:
    parl.seed_everything(seed)
    func = parl.create_algorithm_func(
        MLPActorCritic, dict(obs_dim=4, num_actions=2, hidden_sizes=hidden), A2C, dict(learning_rate=1e-3)
    )
    return parl.TaskSettings(func).make_task(name)


def q_model(name: str, seed: int) -> parl.ComputationTask:
    parl.seed_everything(seed)
    func = parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(64, 64)), DQN, {})
    return parl.TaskSettings(func).make_task(name)


class CountsClose(gym.Wrapper):
    """CartPole counting the environments made and closed."""

    made: List[int] = []
    closed: List[int] = []

    def __init__(self, seed: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.seed = seed
        CountsClose.made.append(seed)

    def close(self) -> None:
        CountsClose.closed.append(self.seed)
        super().close()


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    CountsClose.made, CountsClose.closed = [], []


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def gym_agent(seed: int) -> GymAgent:
    return GymAgent(CountsClose(seed), seed=seed)


class RecordsBatches:
    """Wraps ``task.predict``, recording the rows of every call."""

    def __init__(self, task: parl.ComputationTask) -> None:
        self.rows: List[int] = []
        predict = task.predict

        def recorded(inputs, states, **kwargs):
            self.rows.append(len(next(iter(inputs.values()))))
            return predict(inputs, states, **kwargs)

        task.predict = recorded


@pytest.fixture(params=["c", "python"])
def park(request, monkeypatch) -> str:
    """Both parking paths: the C extension's and its Python twins."""
    if request.param == "python":
        monkeypatch.setattr(concurrent, "EXTENSION", None)
    return request.param


@pytest.mark.parametrize(
    "make_task, seed", [(actor_critic, 0), (actor_critic, 1), (q_model, 2), (q_model, 3), (actor_critic, 4)]
)
def test_concurrent_episodes_return_what_one_by_one_play_returns(park, make_task, seed) -> None:
    task = make_task("RL", seed)
    first = 100 * seed
    one_by_one = evaluate_agents(gym_agent, {"RL": task}, episodes=12, seed=first, concurrency=1)
    assert one_by_one == [evaluate(task, cartpole, 1, seed=first + i)[0] for i in range(12)]
    assert len(set(one_by_one)) > 1  # untrained policies: episodes of different lengths leave the batch apart
    for concurrency in (3, 5, 32):
        assert evaluate_agents(gym_agent, {"RL": task}, episodes=12, seed=first, concurrency=concurrency) == one_by_one


def test_a_row_of_the_example_mlps_does_not_depend_on_its_batch() -> None:
    # What makes concurrent play give one-by-one play's returns with these models.
    inputs = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    for task in (actor_critic("RL", 5), actor_critic("RL", 6, hidden=(16,)), q_model("RL", 7)):
        alone = [task.predict({"obs": inputs[i : i + 1]}, {}, deterministic=True)[0]["action"][0] for i in range(64)]
        for n in (2, 7, 32, 64):
            batch = task.predict({"obs": inputs[:n]}, {}, deterministic=True)[0]["action"]
            np.testing.assert_array_equal(batch, np.stack(alone[:n]))


class TwoTaskAgent(parl.Agent):
    """Predicts several times a step, with two tasks: the action is the sum of their greedy actions
    and a second prediction of task A on a shifted observation, modulo 2."""

    def __init__(self, seed: int) -> None:
        super().__init__(CountsClose(seed), seed=seed)

    def run_one_episode(self) -> Dict[str, float]:
        obs, _ = self.reset_env()
        total, steps, done = 0.0, 0, False
        while not done:
            inputs = {"obs": obs.astype(np.float32)}
            a, _ = self.helpers["A"].predict(inputs)
            b, _ = self.helpers["B"].predict(inputs)
            again, _ = self.helpers["A"].predict({"obs": inputs["obs"] + np.float32(0.1)})
            action = int(a["action"][0] + b["action"][0] + again["action"][0]) % 2
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            for helper in self.helpers.values():
                helper.store_data(inputs, a, reward, {"obs": next_obs}, terminated, truncated)
                assert helper.learn() is None
            obs, total, steps, done = next_obs, total + reward, steps + 1, terminated or truncated
        return {"reward": total, "steps": steps}


def test_an_agent_predicting_several_times_a_step_from_two_tasks_plays_as_one_by_one(park) -> None:
    tasks = {"A": actor_critic("A", 8), "B": q_model("B", 9)}
    records = {name: RecordsBatches(task) for name, task in tasks.items()}
    one_by_one = evaluate_agents(TwoTaskAgent, tasks, episodes=8, seed=70, concurrency=1)
    assert max(records["A"].rows) == max(records["B"].rows) == 1
    assert evaluate_agents(TwoTaskAgent, tasks, episodes=8, seed=70, concurrency=8) == one_by_one
    assert max(records["A"].rows) == max(records["B"].rows) == 8
    assert len(set(one_by_one)) > 1


def test_predictions_are_batched_across_the_episodes(park) -> None:
    task = actor_critic("RL", 10)
    record = RecordsBatches(task)
    returns = evaluate_agents(gym_agent, {"RL": task}, episodes=8, seed=0, concurrency=8)
    # Every round is one batch of the episodes still running: 8 rows while all 8 play, then fewer.
    assert record.rows[0] == 8 and max(record.rows) == 8
    assert record.rows == sorted(record.rows, reverse=True)
    assert len(record.rows) == max(returns) and sum(record.rows) == sum(returns)  # one row per env step


def test_at_most_concurrency_episodes_play_at_once() -> None:
    task = actor_critic("RL", 11)
    record = RecordsBatches(task)
    returns = evaluate_agents(gym_agent, {"RL": task}, episodes=10, seed=0, concurrency=3)
    assert max(record.rows) == 3 and sum(record.rows) == sum(returns)
    assert sorted(CountsClose.made) == sorted(CountsClose.closed) == list(range(10))


def test_a_first_episode_below_the_bar_plays_alone_and_is_the_only_one() -> None:
    task = actor_critic("RL", 12)
    first = evaluate_agents(gym_agent, {"RL": task}, episodes=1, seed=70)[0]
    CountsClose.made = []
    assert evaluate_agents(gym_agent, {"RL": task}, episodes=6, seed=70, stop_below=first + 1) == [first]
    assert CountsClose.made == [70]
    record = RecordsBatches(task)
    returns = evaluate_agents(gym_agent, {"RL": task}, episodes=6, seed=70, stop_below=first)
    assert returns == evaluate_agents(gym_agent, {"RL": task}, episodes=6, seed=70, concurrency=1)
    assert record.rows[: int(first)] == [1] * int(first)  # the first episode alone, then the other five at once
    assert record.rows[int(first)] == 5


class FailsAt(GymAgent):
    """A GymAgent whose episode raises at env step ``steps[seed]`` (never when absent)."""

    steps: Dict[int, int] = {}

    def __init__(self, seed: int) -> None:
        super().__init__(CountsClose(seed), seed=seed)

    def after_step(self, costs) -> None:
        if self.total_steps == FailsAt.steps.get(self.seed):
            raise RuntimeError(f"episode {self.seed} failed")


def test_the_first_failing_episode_in_order_raises_once_every_env_is_closed(park) -> None:
    task = actor_critic("RL", 13)
    # Episode 5 fails first in time; episode 2, later: one-by-one play would have raised episode 2's.
    FailsAt.steps = {2: 8, 5: 2}
    with pytest.raises(RuntimeError, match="episode 2 failed"):
        evaluate_agents(FailsAt, {"RL": task}, episodes=8, seed=0, concurrency=8)
    assert sorted(CountsClose.made) == sorted(CountsClose.closed) == list(range(8))
    FailsAt.steps = {1: 3}
    CountsClose.made, CountsClose.closed = [], []
    with pytest.raises(RuntimeError, match="episode 1 failed"):
        evaluate_agents(FailsAt, {"RL": task}, episodes=20, seed=0, concurrency=4)
    assert sorted(CountsClose.made) == sorted(CountsClose.closed)
    assert max(CountsClose.made) < 4  # no episode after the failure starts


def test_an_episode_returning_no_statistics_is_refused() -> None:
    class NoStatistics(GymAgent):
        def run_one_episode(self):
            super().run_one_episode()
            return None

    with pytest.raises(parl.core.errors.EpisodeResultError, match="returned None"):
        evaluate_agents(
            lambda s: NoStatistics(CountsClose(s), seed=s), {"RL": actor_critic("RL", 14)}, episodes=3, seed=0
        )
    assert sorted(CountsClose.closed) == [0, 1, 2]


def test_a_sample_that_breaks_the_specs_raises_in_its_agent(park) -> None:
    class WrongShape(GymAgent):
        def act(self, inputs, states):
            return super().act({"obs": inputs["obs"][:3]} if self.seed == 1 else inputs, states)

    with pytest.raises(ValueError, match="input 'obs'"):
        evaluate_agents(
            lambda s: WrongShape(CountsClose(s), seed=s), {"RL": actor_critic("RL", 15)}, episodes=3, seed=0
        )
    assert sorted(CountsClose.closed) == [0, 1, 2]


def test_nothing_is_checked_or_built_for_storing(monkeypatch) -> None:
    import parl.core.agent_helper as agent_helper

    def never(*args, **kwargs):
        raise AssertionError("a transition was checked or built")

    monkeypatch.setattr(agent_helper, "check_dict", never)
    monkeypatch.setattr(agent_helper, "Transition", never)
    returns = evaluate_agents(gym_agent, {"RL": actor_critic("RL", 16)}, episodes=4, seed=0)
    assert len(returns) == 4 and min(returns) > 0


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        evaluate_agents(gym_agent, {"RL": actor_critic("RL", 0)}, episodes=2, seed=0, concurrency=0)
