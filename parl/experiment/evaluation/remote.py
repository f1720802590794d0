"""Evaluation apart from training: an evaluation actor on Ray (placement "ray").

    evaluation = RayEvaluation(config)               # one actor, built from the run's config
    returns = evaluation.play(weights, episodes=10, seed=1000)
    evaluation.close()

The actor builds the config's evaluator tasks and evaluation agents (as
:mod:`parl.experiment.evaluation.agents` does in the driver) and plays deterministic episodes with the
weights it is handed for each evaluation: one ``ray.put`` of the learners' weights per
evaluation. It never trains, and checkpoints and metrics stay on the driver. The Trainer uses it
for the evaluations during a run with placement "ray" (the final evaluation on fresh seeds runs in
the driver, after the robot has stopped).
"""

from __future__ import annotations

import sys
from typing import List, Mapping, Optional, Sequence

from parl.experiment.config.build import make_agent, task_settings
from parl.experiment.config.robot_config import RobotConfig
from parl.experiment.evaluation.agents import evaluate_agents
from parl.runtime.ray.broadcast import writable_weights
from parl.runtime.ray.session import import_ray, unpickle_in_actor

#: Times Ray starts a lost evaluation actor again (and plays its evaluation again).
ACTOR_RESTARTS = 2


class EvaluationActor:
    """The actor (made a Ray actor class by :class:`RayEvaluation`): plays evaluation episodes of a
    run's config with the weights it is given; never trains.

    Args:
        paths: the driver's ``sys.path`` (entries that exist here are added before unpickling).
        config: the pickled :class:`~parl.experiment.config.robot_config.RobotConfig`.
    """

    def __init__(self, paths: Sequence[str], config: bytes) -> None:
        self.config: RobotConfig = unpickle_in_actor(paths, config)
        self.tasks = {name: task_settings(self.config, name).make_task(f"{name}-eval") for name in self.config.tasks}
        for task in self.tasks.values():
            task.build_layers()

    def play(
        self, weights: Mapping[str, Mapping[str, object]], episodes: int, seed: int, stop_below: Optional[float]
    ) -> List[float]:
        """Returns of ``episodes`` deterministic episodes (seeds ``seed``, ``seed + 1``, ...) with
        ``weights`` (task name -> :meth:`~parl.ComputationTask.algorithm_weights`); ``stop_below``
        as :func:`~parl.experiment.evaluation.agents.evaluate_agents` takes it."""
        for name, task in self.tasks.items():
            task.set_algorithm_weights(writable_weights(weights[name]))
        config = self.config
        return evaluate_agents(
            lambda agent_seed: make_agent(config, 0, seed=agent_seed),
            self.tasks,
            episodes=episodes,
            seed=seed,
            stop_below=stop_below,
            concurrency=config.evaluation.concurrency,
        )


class RayEvaluation:
    """The driver's handle on one :class:`EvaluationActor` (zero CPUs asked: it plays while the
    robot's agents wait, or beside them)."""

    def __init__(self, config: RobotConfig) -> None:
        ray = import_ray()
        from ray import cloudpickle

        self._ray = ray
        # A lost actor is started again and its evaluation played again (the episodes are seeded):
        # ACTOR_RESTARTS times at most, then play raises and the Trainer evaluates in the driver.
        actor_class = ray.remote(EvaluationActor).options(
            num_cpus=0, max_restarts=ACTOR_RESTARTS, max_task_retries=ACTOR_RESTARTS
        )
        self._actor = actor_class.remote(list(sys.path), cloudpickle.dumps(config))

    def play(
        self, weights: Mapping[str, Mapping[str, object]], episodes: int, seed: int, stop_below: Optional[float] = None
    ) -> List[float]:
        """Returns of ``episodes`` episodes played by the actor with ``weights`` (put in Ray's store once)."""
        ref = self._ray.put(dict(weights))
        return self._ray.get(self._actor.play.remote(ref, episodes, seed, stop_below))

    def close(self) -> None:
        """End the actor."""
        try:
            self._ray.kill(self._actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already (its Ray shut down)
            pass
