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

from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper, Rewards
from parl.core.specs import check_dict, zeros
from parl.serving.computation_task import ComputationTask
from parl.validation import check_int

ArrayDict = Dict[str, np.ndarray]


class EvalHelper(AgentHelper):
    """A helper for evaluation: deterministic predictions from ``task``; stores and learns nothing."""

    def __init__(self, task: ComputationTask) -> None:
        super().__init__()
        self.task = task
        self._what = f"task {task.name!r}"

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """The greedy or mean action for one sample (no batch axis), and the next states."""
        inputs = check_dict(self.task.input_specs, inputs, f"{self._what} input")
        states = check_dict(self.task.state_specs, states if states is not None else {}, f"{self._what} state")
        actions, next_states = self.task.predict(
            {k: v[None] for k, v in inputs.items()}, {k: v[None] for k, v in states.items()}, deterministic=True
        )
        return {k: v[0] for k, v in actions.items()}, {k: v[0] for k, v in next_states.items()}

    def initial_states(self) -> ArrayDict:
        return {k: v[0] for k, v in zeros(self.task.state_specs, 1).items()}

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
    """
    check_int("episodes", episodes, 1)
    returns: List[float] = []
    for i in range(episodes):
        agent = make_agent(seed + i)
        agent.training = False
        agent.helpers = {name: EvalHelper(task) for name, task in tasks.items()}
        try:
            result = agent.run_one_episode()
        finally:
            close = getattr(agent.env, "close", None)
            if close is not None:
                close()
        returns.append(float(result["reward"]))
        if stop_below is not None and i == 0 and returns[0] < stop_below:
            break
    return returns
