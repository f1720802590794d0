"""Greedy evaluation of a ComputationTask on fresh environments, outside any training, and the
check that ends a training run at its target."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from parl.serving.computation_task import ComputationTask
from parl.utils.gym_agent import env_action_converter
from parl.utils.observations import observation_mapper
from parl.validation import check_int


def evaluate(
    task: ComputationTask,
    make_env: Callable[[], Any],
    episodes: int,
    seed: int,
    to_inputs: Optional[Callable[[Any], Dict[str, np.ndarray]]] = None,
    to_env_action: Optional[Callable[[Dict[str, np.ndarray]], Any]] = None,
    max_steps: Optional[int] = None,
) -> List[float]:
    """Returns of ``episodes`` episodes played with ``task.predict(..., deterministic=True)``:
    the greedy or mean action of the policy.

    The episodes play at once, one environment each, so every step is one
    batched prediction over the episodes still running. Episode ``i`` resets
    its environment with seed ``seed + i``. Recurrent states start at zero and
    are carried through each episode. Actions are converted by
    :func:`~parl.utils.gym_agent.env_action_converter` unless ``to_env_action``
    is given, observations by :func:`~parl.utils.observations.observation_mapper` of the observation
    space unless ``to_inputs`` is given; ``max_steps`` caps the length of every episode.
    """
    check_int("episodes", episodes, 1)
    envs = [make_env() for _ in range(episodes)]
    try:
        if to_env_action is None:
            to_env_action = env_action_converter(envs[0].action_space)
        if to_inputs is None:
            to_inputs = observation_mapper(getattr(envs[0], "observation_space", None), "evaluate")
        obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
        states = task.initial_states(episodes)
        totals, steps = [0.0] * episodes, 0
        active = list(range(episodes))  # episodes still running, in the order of the batch rows
        while active and (max_steps is None or steps < max_steps):
            rows = [to_inputs(obs[i]) for i in active]
            inputs = {k: np.stack([row[k] for row in rows]) for k in rows[0]}
            actions, states = task.predict(inputs, states, deterministic=True)
            keep = []
            for row, i in enumerate(active):
                obs[i], reward, terminated, truncated, _ = envs[i].step(
                    to_env_action({k: v[row] for k, v in actions.items()})
                )
                totals[i] += float(reward)
                if not (terminated or truncated):
                    keep.append(row)
            steps += 1
            if len(keep) < len(active):
                states = {k: v[keep] for k, v in states.items()}
                active = [active[row] for row in keep]
    finally:
        for env in envs:
            env.close()
    return totals


class Check(NamedTuple):
    """One greedy check (see :func:`confirmed_check`).

    Attributes:
        score: the mean return of every episode the check played.
        passed: whether the check reached the target with its confirmation (see :func:`confirmed_check`).
        returns: those episodes' returns, in the order played.
    """

    score: float
    passed: bool
    returns: List[float]


def check_seed(run_seed: int, env_steps: int) -> int:
    """First environment seed of the greedy check that run ``run_seed`` makes at ``env_steps``.

    Every run has its own block of ``2**32`` seeds, checks at the bottom of it
    and its final evaluation (:func:`final_seed`) half-way up, so runs of
    different seeds are checked and finally evaluated on different episodes,
    and no check plays an episode of the final evaluation.
    """
    return ((run_seed + 1) << 32) + env_steps


def final_seed(run_seed: int) -> int:
    """First environment seed of the final evaluation of run ``run_seed`` (see :func:`check_seed`)."""
    return ((run_seed + 1) << 32) + (1 << 31)


#: Episodes that confirm a check, and of the final evaluation after training, per episode of a check.
CONFIRM_FACTOR = 5


#: Standard errors the mean return of a confirmed check must clear its target by (one-sided, about
#: 98% for a normal mean): a policy that only sometimes reaches the target does not stop training.
CONFIDENCE = 2.0


def lower_bound(returns: Sequence[float]) -> float:
    """``mean - CONFIDENCE * standard error`` of ``returns``: a lower confidence bound of the policy's
    mean return (the mean itself for one return)."""
    values = np.asarray(returns, dtype=np.float64)
    if values.size < 2:
        return float(values.mean())
    return float(values.mean() - CONFIDENCE * values.std(ddof=1) / np.sqrt(values.size))


def confirmed_check(
    play: Callable[[int, int], Sequence[float]],
    *,
    episodes: int,
    target: Optional[float],
    seed: int,
    confirm_episodes: Optional[int] = None,
) -> Check:
    """The check that ends training: a target reached with confidence, on seeds no check has used.

    ``play(n, first_seed)`` plays ``n`` deterministic episodes seeded
    ``first_seed``, ``first_seed + 1``, ... and returns their returns. The check
    plays one episode (a policy not there yet costs one episode), then
    ``episodes - 1`` more when it reached ``target``; when their mean reaches
    ``target`` too, ``confirm_episodes`` further episodes (default
    ``episodes``; seeds ``seed + episodes`` on) confirm it. The check passes
    when the confirmation's mean reaches ``target`` and so does the
    :func:`lower_bound` of the mean over all the returns (``CONFIDENCE``
    standard errors below it). A policy that always scores the same passes at
    its target; one whose returns spread (a CartPole policy that sometimes
    falls early) passes only with its mean clear of the target by their
    spread. Training checks a policy many times, and a policy that fails now
    and then passes a small check by luck sooner or later; a confirmation of
    many episodes (the Trainer asks ``CONFIRM_FACTOR`` times ``episodes``) is what keeps
    a run from stopping on it. Without a ``target`` the check plays
    ``episodes`` episodes and never passes.
    """
    check_int("episodes", episodes, 1)
    confirm_episodes = episodes if confirm_episodes is None else check_int("confirm_episodes", confirm_episodes, 1)
    if target is None:
        returns = [float(r) for r in play(episodes, seed)]
        return Check(float(np.mean(returns)), False, returns)
    returns = [float(r) for r in play(1, seed)]
    if returns[0] >= target and episodes > 1:
        returns += [float(r) for r in play(episodes - 1, seed + 1)]
    if len(returns) < episodes or float(np.mean(returns)) < target:
        return Check(float(np.mean(returns)), False, returns)
    confirmation = [float(r) for r in play(confirm_episodes, seed + episodes)]
    returns += confirmation
    passed = float(np.mean(confirmation)) >= target and lower_bound(returns) >= target
    return Check(float(np.mean(returns)), passed, returns)
