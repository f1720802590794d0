"""Evaluation agents: the robot's own agent class, acting deterministically through helpers that never learn.

    tasks = {name: task_settings(config, name).make_task(f"{name}-eval") for name in config.tasks}
    copy_weights(learner_tasks, tasks)
    returns = evaluate_agents(lambda seed: make_agent(config, 0, seed=seed), tasks, episodes=10, seed=1000)

Evaluation agents are built like the training agents, with ``training`` set to
False (exploration code acts greedily then) and one :class:`EvalHelper` per
task. They predict straight from separate evaluator tasks, which hold a copy of
the learners' weights, so evaluation never feeds or slows the training batches.

The episodes play at once, up to ``concurrency`` at a time, each agent a greenlet
running its ``run_one_episode`` unchanged (:mod:`parl.runtime.episodes`):
every round, the parked predictions of a task are one deterministic
``task.predict`` batch. An agent's episode is the one it would play alone on its
seed; with parl's CartPole models a row's prediction does not depend on the batch
it is in, so the returns are those of one-by-one play (``concurrency=1``).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper, Rewards
from parl.core.communicator import Communicator
from parl.experiment.config.robot_config import EVALUATION_CONCURRENCY as CONCURRENCY
from parl.runtime.episodes import play_episodes
from parl.serving.computation_task import ComputationTask
from parl.serving.direct import DirectCommunicator
from parl.validation import check_int

ArrayDict = Dict[str, np.ndarray]

#: Evaluation episodes played at once by default: one prediction batch of up to this many rows per
#: round, and as many environments open.


class EvalHelper(AgentHelper):
    """A helper for evaluation: deterministic predictions from ``task``; it keeps nothing of what
    is stored (not even checking it: no step of an evaluation is learned from) and never learns.

    Its predictions are checked against the task's specs as every transport checks them. They are
    made in the agent's own thread (:class:`~parl.serving.direct.DirectCommunicator`) unless
    ``communicator`` is given (the parking transport of concurrent evaluation episodes).
    """

    learns = False

    def __init__(self, task: ComputationTask, *, communicator: Optional[Communicator] = None) -> None:
        super().__init__()
        self.task = task
        self.bind(DirectCommunicator(task, deterministic=True) if communicator is None else communicator)

    def store_data(
        self,
        inputs: Mapping[str, object],
        actions: Mapping[str, object],
        rewards: Rewards,
        next_inputs: Mapping[str, object],
        terminated: bool,
        truncated: bool,
        states: Optional[Mapping[str, object]] = None,
        next_states: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Evaluation keeps no experience: the transition is neither checked nor built."""

    def learn(self) -> None:
        """Evaluation never trains."""
        return None


def copy_weights(sources: Mapping[str, ComputationTask], targets: Mapping[str, ComputationTask]) -> None:
    """Copy every source task's weights (and input statistics) into the target task of the same name."""
    for name, target in targets.items():
        target.set_algorithm_weights(sources[name].algorithm_weights())


def evaluate_agents(
    make_agent: Callable[[int], Agent],
    tasks: Mapping[str, ComputationTask],
    *,
    episodes: int,
    seed: int,
    stop_below: Optional[float] = None,
    concurrency: int = CONCURRENCY,
) -> List[float]:
    """Returns of ``episodes`` episodes, episode ``i`` played by a fresh ``make_agent(seed + i)``
    acting through :class:`EvalHelper` s over ``tasks``, in episode order.

    The episodes play at most ``concurrency`` at a time, their predictions batched per task
    (see the module docstring); ``concurrency=1`` plays them one after another. Each episode's
    environment is closed when it ends. With ``stop_below``, a first episode returning less than
    it is the only one played (it plays alone, before the others): a policy that is not there yet
    costs one episode to check.

    Raises:
        ValueError: ``episodes`` or ``concurrency`` is not an integer >= 1.
        EpisodeResultError: an episode's ``run_one_episode`` returned no valid statistics.
        Exception: what an episode's agent raised (of the first failing episode, in episode order;
            the episodes after it are ended, every environment closed).
    """
    check_int("episodes", episodes, 1)
    check_int("concurrency", concurrency, 1)

    def play(first: int, count: int) -> List[float]:
        def agent(i: int) -> Agent:
            evaluator = make_agent(seed + first + i)
            evaluator.training = False
            return evaluator

        results = play_episodes(
            agent,
            count,
            tasks,
            lambda name, communicator: EvalHelper(tasks[name], communicator=communicator),
            concurrency=concurrency,
        )
        return [float(result["reward"]) for result in results]

    if stop_below is None:
        return play(0, episodes)
    returns = play(0, 1)
    if returns[0] < stop_below or episodes == 1:
        return returns
    return returns + play(1, episodes - 1)
