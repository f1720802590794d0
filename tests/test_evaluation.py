"""evaluate(): episodes played at once with batched deterministic predictions give the returns of
the same episodes played one by one, recurrent states included."""

from __future__ import annotations

from typing import List

import gymnasium as gym
import pytest

import parl
from parl.algorithms import A2C
from parl.models import LSTMActorCritic, MLPActorCritic
from parl.utils.evaluation import evaluate


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def task_of(model_cls, seed: int, **model_args) -> parl.ComputationTask:
    parl.seed_everything(seed)
    func = parl.create_algorithm_func(
        model_cls, dict(obs_dim=4, num_actions=2, **model_args), A2C, dict(gamma=0.99, learning_rate=1e-3)
    )
    return parl.TaskSettings(func).make_task("eval")


def one_by_one(task: parl.ComputationTask, episodes: int, seed: int, **kwargs) -> List[float]:
    return [evaluate(task, cartpole, 1, seed=seed + i, **kwargs)[0] for i in range(episodes)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_episodes_return_what_they_return_one_by_one(seed: int) -> None:
    task = task_of(MLPActorCritic, seed, hidden_sizes=(16,))
    batched = evaluate(task, cartpole, 6, seed=40 + seed)
    assert batched == one_by_one(task, 6, 40 + seed)
    # A random policy's CartPole episodes end at different steps: rows leave the batch one by one.
    assert len(set(batched)) > 1


def test_recurrent_states_follow_their_episode_when_others_end() -> None:
    task = task_of(LSTMActorCritic, 3, hidden_size=8)
    batched = evaluate(task, cartpole, 6, seed=7)
    assert len(set(batched)) > 1
    assert batched == one_by_one(task, 6, 7)


def test_max_steps_caps_every_episode() -> None:
    task = task_of(MLPActorCritic, 0, hidden_sizes=(16,))
    full = evaluate(task, cartpole, 5, seed=11)
    capped = evaluate(task, cartpole, 5, seed=11, max_steps=8)
    assert capped == [min(r, 8.0) for r in full]


def test_episodes_must_be_positive() -> None:
    task = task_of(MLPActorCritic, 0, hidden_sizes=(16,))
    with pytest.raises(ValueError, match="episodes"):
        evaluate(task, cartpole, 0, seed=0)


class RecordsClose(gym.Wrapper):
    closed = 0

    def close(self) -> None:
        RecordsClose.closed += 1
        super().close()


def test_every_environment_is_closed() -> None:
    RecordsClose.closed = 0
    task = task_of(MLPActorCritic, 0, hidden_sizes=(16,))
    evaluate(task, lambda: RecordsClose(cartpole()), 3, seed=0)
    assert RecordsClose.closed == 3
