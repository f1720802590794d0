"""RayEvaluation: placement ``"ray"`` plays a run's evaluations on an actor apart from the learners.

    evaluation = RayEvaluation(ConfigEvaluator, config)     # one actor that builds ConfigEvaluator(config)
    returns = evaluation.play(weights, episodes=10, seed=1000)
    evaluation.close()

The actor asks Ray for no CPU (it plays while the robot's agents wait, or beside them) and is handed
the learners' weights with each evaluation: one ``ray.put`` per evaluation. It never trains;
checkpoints and metrics stay on the driver. A lost actor is started again and its evaluation played
again (the episodes are seeded), :data:`ACTOR_RESTARTS` times at most, then ``play`` raises.
"""

from __future__ import annotations

import sys
from typing import Callable, List, Optional, Sequence

from parl.runtime.ray.broadcast import writable_weights
from parl.runtime.ray_cluster.session import import_ray, unpickle_in_actor
from parl.runtime.remote_evaluation import Evaluator, RemoteEvaluation, Weights

#: Times Ray starts a lost evaluation actor again (and plays its evaluation again).
ACTOR_RESTARTS = 2


class EvaluationActor:
    """The actor (made a Ray actor class by :class:`RayEvaluation`): builds the evaluator it is sent and
    plays its evaluations.

    Args:
        paths: the driver's ``sys.path`` (entries that exist here are added before unpickling).
        evaluator: the pickled ``(evaluator class, argument)``.
    """

    def __init__(self, paths: Sequence[str], evaluator: bytes) -> None:
        make, argument = unpickle_in_actor(paths, evaluator)
        self.evaluator: Evaluator = make(argument)

    def play(self, weights: Weights, episodes: int, seed: int, stop_below: Optional[float]) -> List[float]:
        """The evaluator's returns with ``weights`` (arrays from Ray's store, copied where read-only)."""
        return self.evaluator.play(writable_weights(weights), episodes, seed, stop_below)


class RayEvaluation(RemoteEvaluation):
    """The driver's handle on one :class:`EvaluationActor`."""

    def __init__(self, evaluator: Callable[[object], Evaluator], argument: object) -> None:
        ray = import_ray()
        from ray import cloudpickle

        self._ray = ray
        actor_class = ray.remote(EvaluationActor).options(
            num_cpus=0, max_restarts=ACTOR_RESTARTS, max_task_retries=ACTOR_RESTARTS
        )
        self._actor = actor_class.remote(list(sys.path), cloudpickle.dumps((evaluator, argument)))

    def play(self, weights: Weights, episodes: int, seed: int, stop_below: Optional[float] = None) -> List[float]:
        """Returns of ``episodes`` episodes played by the actor with ``weights`` (put in Ray's store once)."""
        ref = self._ray.put(dict(weights))
        return self._ray.get(self._actor.play.remote(ref, episodes, seed, stop_below))

    def close(self) -> None:
        """End the actor."""
        try:
            self._ray.kill(self._actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already (its Ray shut down)
            pass
