"""evaluate(): episodes played at once with batched deterministic predictions give the returns of
the same episodes played one by one, recurrent states included; confirmed_check(): the check that
ends training."""

from __future__ import annotations

from typing import List

import gymnasium as gym
import numpy as np
import pytest

import parl
from parl.algorithms import A2C
from parl.experiment.evaluation.greedy import Check, check_seed, confirmed_check, evaluate, final_seed, lower_bound
from parl.models import LSTMActorCritic, MLPActorCritic


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


# -- the check that ends training ------------------------------------------------------------------


class Scripted:
    """``play(n, first_seed)`` answering from a table of returns by seed, recording what it was asked."""

    def __init__(self, returns_by_seed) -> None:
        self.returns_by_seed = returns_by_seed
        self.calls = []

    def __call__(self, n, first_seed):
        self.calls.append((n, first_seed))
        return [self.returns_by_seed(first_seed + i) for i in range(n)]


def test_a_first_episode_below_the_target_is_the_whole_check() -> None:
    play = Scripted(lambda seed: 100.0)
    check = confirmed_check(play, episodes=10, target=475.0, seed=7)
    assert check == Check(100.0, False, [100.0]) and play.calls == [(1, 7)]


def test_a_steady_policy_at_the_target_passes_after_its_confirmation_on_the_next_seeds() -> None:
    play = Scripted(lambda seed: 500.0)
    check = confirmed_check(play, episodes=10, target=475.0, seed=7)
    assert check.passed and check.score == 500.0 and len(check.returns) == 20
    assert play.calls == [(1, 7), (9, 8), (10, 17)]  # seeds 7-16, then 17-26 to confirm


def test_a_confirmation_below_the_target_does_not_pass() -> None:
    play = Scripted(lambda seed: 500.0 if seed < 17 else 450.0)
    check = confirmed_check(play, episodes=10, target=475.0, seed=7)
    assert not check.passed and check.score == pytest.approx(475.0)


def test_a_mean_above_the_target_with_a_wide_spread_does_not_pass() -> None:
    # Mean 482.5 over 20, both halves above 475, but two early falls: the lower bound is below 475.
    play = Scripted(lambda seed: 350.0 if seed in (9, 20) else 500.0)
    check = confirmed_check(play, episodes=10, target=475.0, seed=7)
    assert check.score == pytest.approx(485.0) and not check.passed
    assert lower_bound(check.returns) < 475.0 < float(np.mean(check.returns[10:]))
    steady = confirmed_check(Scripted(lambda seed: 490.0 if seed % 2 else 480.0), episodes=10, target=475.0, seed=7)
    assert steady.passed  # a spread of 10 around 485: the bound clears 475


def test_without_a_target_a_check_plays_every_episode_and_never_passes() -> None:
    play = Scripted(lambda seed: float(seed))
    check = confirmed_check(play, episodes=3, target=None, seed=1)
    assert check == Check(2.0, False, [1.0, 2.0, 3.0]) and play.calls == [(3, 1)]


def test_the_lower_bound_is_the_mean_less_two_standard_errors() -> None:
    returns = [1.0, 2.0, 3.0, 4.0]
    assert lower_bound(returns) == pytest.approx(2.5 - 2.0 * np.std(returns, ddof=1) / 2.0)
    assert lower_bound([5.0]) == 5.0 and lower_bound([3.0, 3.0]) == 3.0


def test_every_run_checks_and_finally_evaluates_on_episodes_of_its_own() -> None:
    runs = range(10)
    checks = {
        run: {check_seed(run, steps) + i for steps in range(0, 200_000, 1_000) for i in range(20)} for run in runs
    }
    finals = {run: set(range(final_seed(run), final_seed(run) + 10)) for run in runs}
    for run in runs:
        assert not checks[run] & finals[run]  # no check plays an episode of the final evaluation
        for other in runs:
            if other != run:
                assert not (checks[run] | finals[run]) & (checks[other] | finals[other])
    assert check_seed(0, 0) > 0 and final_seed(3) - check_seed(3, 0) == 2**31


def test_a_longer_confirmation_plays_its_own_count_on_the_next_seeds() -> None:
    play = Scripted(lambda seed: 500.0)
    check = confirmed_check(play, episodes=10, target=475.0, seed=7, confirm_episodes=50)
    assert check.passed and len(check.returns) == 60 and play.calls == [(1, 7), (9, 8), (50, 17)]
    # One early fall in the 50 confirming episodes sinks neither mean nor bound; five do.
    one = confirmed_check(
        Scripted(lambda s: 250.0 if s == 30 else 500.0), episodes=10, target=475.0, seed=7, confirm_episodes=50
    )
    five = confirmed_check(
        Scripted(lambda s: 250.0 if s in (20, 30, 40, 50, 60) else 500.0),
        episodes=10,
        target=475.0,
        seed=7,
        confirm_episodes=50,
    )
    assert one.passed and not five.passed
    with pytest.raises(ValueError, match="confirm_episodes"):
        confirmed_check(play, episodes=10, target=475.0, seed=7, confirm_episodes=0)
