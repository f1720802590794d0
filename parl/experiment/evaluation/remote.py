"""Evaluation apart from training, where the run's placement plays it (placement "ray": an actor).

    evaluation = remote_evaluation(config)           # None: this placement evaluates in the driver
    returns = evaluation.play(weights, episodes=10, seed=1000)
    evaluation.close()

The placement's :class:`~parl.runtime.remote_evaluation.RemoteEvaluation` (its registry entry's
``evaluation``) builds a :class:`ConfigEvaluator` of the run's config where it plays: the config's
evaluator tasks and evaluation agents, as :mod:`parl.experiment.evaluation.agents` builds them in the
driver, playing deterministic episodes with the weights handed over for each evaluation. It never
trains, and checkpoints and metrics stay on the driver. The Trainer uses it for the evaluations
during a run (the final evaluation on fresh seeds runs in the driver, after the robot has stopped).
"""

from __future__ import annotations

from typing import List, Optional

from parl.experiment.config.build import make_agent, task_settings
from parl.experiment.config.robot_config import RobotConfig
from parl.experiment.evaluation.agents import evaluate_agents
from parl.runtime.remote_evaluation import RemoteEvaluation, Weights


class ConfigEvaluator:
    """Plays evaluation episodes of a run's config with the weights it is given; never trains."""

    def __init__(self, config: RobotConfig) -> None:
        self.config = config
        self.tasks = {name: task_settings(config, name).make_task(f"{name}-eval") for name in config.tasks}
        for task in self.tasks.values():
            task.build_layers()

    def play(self, weights: Weights, episodes: int, seed: int, stop_below: Optional[float]) -> List[float]:
        """Returns of ``episodes`` deterministic episodes (seeds ``seed``, ``seed + 1``, ...) with
        ``weights`` (task name -> :meth:`~parl.ComputationTask.algorithm_weights`); ``stop_below``
        as :func:`~parl.experiment.evaluation.agents.evaluate_agents` takes it."""
        for name, task in self.tasks.items():
            task.set_algorithm_weights(weights[name])
        config = self.config
        return evaluate_agents(
            lambda agent_seed: make_agent(config, 0, seed=agent_seed),
            self.tasks,
            episodes=episodes,
            seed=seed,
            stop_below=stop_below,
            concurrency=config.evaluation.concurrency,
        )


def remote_evaluation(config: RobotConfig) -> Optional[RemoteEvaluation]:
    """A :class:`ConfigEvaluator` of ``config`` where its placement plays evaluations, or None when
    that is the driver."""
    remote = config.placement.entry.remote_evaluation()
    return None if remote is None else remote(ConfigEvaluator, config)
