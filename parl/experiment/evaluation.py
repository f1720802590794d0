"""Evaluation agents: the robot's own agent class, acting deterministically through helpers that never learn.

    tasks = {name: task_settings(config, name).make_task(f"{name}-eval") for name in config.tasks}
    copy_weights(learner_tasks, tasks)
    returns = evaluate_agents(lambda seed: make_agent(config, 0, seed=seed), tasks, episodes=10, seed=1000)

Evaluation agents are built like the training agents, with ``training`` set to
False (exploration code acts greedily then) and one :class:`EvalHelper` per
task. They predict straight from separate evaluator tasks, which hold a copy of
the learners' weights, so evaluation never feeds or slows the training batches.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from parl.core.agent import Agent, check_episode_result
from parl.core.agent_helper import AgentHelper
from parl.core.batch import Transition
from parl.serving.computation_task import ComputationTask
from parl.serving.direct import DirectCommunicator
from parl.validation import check_int

ArrayDict = Dict[str, np.ndarray]


class EvalHelper(AgentHelper):
    """A helper for evaluation: deterministic predictions from ``task``, called in the agent's own
    thread (:class:`~parl.serving.direct.DirectCommunicator`); it checks what is stored, keeps none
    of it, and never learns."""

    def __init__(self, task: ComputationTask) -> None:
        super().__init__()
        self.task = task
        self.bind(DirectCommunicator(task, deterministic=True))

    def _store(self, transition: Transition, episode_over: bool) -> None:
        """Evaluation keeps no experience."""

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
) -> List[float]:
    """Returns of ``episodes`` episodes, episode ``i`` played by a fresh ``make_agent(seed + i)``
    acting through :class:`EvalHelper` s over ``tasks``.

    With ``stop_below``, a first episode returning less than it is the only one
    played: a policy that is not there yet costs one episode to check.

    Raises:
        EpisodeResultError: an episode's ``run_one_episode`` returned no valid statistics.
    """
    check_int("episodes", episodes, 1)
    returns: List[float] = []
    for i in range(episodes):
        agent = make_agent(seed + i)
        agent.training = False
        agent.helpers = {name: EvalHelper(task) for name, task in tasks.items()}
        try:
            result = check_episode_result(agent.run_one_episode())
        finally:
            close = getattr(agent.env, "close", None)
            if close is not None:
                close()
        returns.append(float(result["reward"]))
        if stop_below is not None and i == 0 and returns[0] < stop_below:
            break
    return returns
